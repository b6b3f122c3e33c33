//! Compiling Ingresses — and what they reference — into a draft table.
//!
//! A pure function of a [`ClusterSnapshot`]: the same objects always compile to the same table, so
//! the watcher, the `--manifests` file source and the tests all share it. What it does, in order:
//!
//! 1. keep the Ingresses of our class ([`ClassSelector`]);
//! 2. order them oldest first (`creationTimestamp`, then namespace/name), which is how every conflict
//!    is decided: a host+path+pathType, a TLS host or the default backend belongs to the oldest
//!    Ingress that claims it, and the others get a diagnostic;
//! 3. resolve each Ingress completely — hosts, paths, Services and their ports, endpoints through
//!    EndpointSlices, certificates from Secrets — before any of it enters the table. An Ingress
//!    with a problem (unknown Service or port, missing or invalid Secret, invalid host or path) is
//!    reported and left out whole; the others compile as if it were not there.
//!
//! [`super::cluster::compile`] runs it first, then the Gateway API compiler into the same draft: on
//! a conflict, the Ingress keeps the path.
//!
//! `docs/ingress.md` describes the semantics for users.

mod auth;
mod client_certs;
mod custom_headers;
mod error_pages;
mod external_auth;
mod location;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend, IngressClass, IngressServiceBackend};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ramjet_shared::{
    check_regex_path, Backend, BackendKind, BackendProtocol, CertId, Certificate, DirectResponse, Filter, ObjectRef,
    PathKind, RouteLimits, RouteOrigin, RoutePolicy, Rule, Source, TlsTarget, TrailingSlash, UpstreamTlsSpec,
};

use super::annotations::{self, values, Verdict, BACKEND_PROTOCOL_ANNOTATIONS, SSL_REDIRECT_ANNOTATIONS};
use super::resolve::{PortRef, Resolver, OPAQUE_SECRET_TYPE, TLS_SECRET_TYPE};
use super::snapshot::{namespace_of, ClusterSnapshot};
use super::Draft;
use crate::canary::promotion::{AutoPromote, CanaryPlan, CanaryState, STATE_ANNOTATION};
use crate::canary::{effective_total, Annotations, MirrorTarget};
use crate::certs::is_expired;
use crate::routes_file::validate_host;
use auth::AuthPlan;
use client_certs::HostAuth;
use location::{regex_location, PathAnnotations, RegexSource};

/// Where the daemon and the integration tests name the options.
pub use super::snapshot::IngressOptions;

/// `kubernetes.io/ingress.class`: the class before `spec.ingressClassName` existed.
pub const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// Marks an IngressClass as the one for Ingresses that name none.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// Decides whether an Ingress belongs to this controller.
#[derive(Debug, Clone)]
pub struct ClassSelector {
    /// IngressClasses whose `spec.controller` is ours.
    ours: HashSet<String>,
    /// One of them carries the default-class annotation.
    default: bool,
    legacy_name: String,
}

impl ClassSelector {
    pub fn new(classes: &[Arc<IngressClass>], options: &IngressOptions) -> Self {
        let mut ours = HashSet::new();
        let mut default = false;
        for class in classes {
            let controller = class.spec.as_ref().and_then(|s| s.controller.as_deref());
            if controller != Some(options.controller_name.as_str()) {
                continue;
            }
            if let Some(name) = &class.metadata.name {
                ours.insert(name.clone());
            }
            let annotations = class.metadata.annotations.as_ref();
            if annotations.and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION)).is_some_and(|v| v == "true") {
                default = true;
            }
        }
        ClassSelector { ours, default, legacy_name: options.ingress_class.clone() }
    }

    /// `spec.ingressClassName` naming one of our IngressClasses; without it, the legacy annotation
    /// naming our class; without either, our IngressClass being the default one.
    pub fn selects(&self, ingress: &Ingress) -> bool {
        if let Some(class) = ingress.spec.as_ref().and_then(|s| s.ingress_class_name.as_ref()) {
            return self.ours.contains(class);
        }
        let legacy = ingress.metadata.annotations.as_ref().and_then(|a| a.get(LEGACY_CLASS_ANNOTATION));
        match legacy {
            Some(name) => *name == self.legacy_name,
            None => self.default,
        }
    }
}

/// Compiles the Ingresses of our class into `draft`, resolving through `resolver`.
pub(super) fn compile<'s>(snapshot: &'s ClusterSnapshot, resolver: &mut Resolver<'s, '_>, draft: &mut Draft) {
    let selector = ClassSelector::new(&snapshot.ingress_classes, &snapshot.options);
    let mut ours: Vec<&Ingress> = snapshot.ingresses.iter().map(|i| &**i).filter(|i| selector.selects(i)).collect();
    ours.sort_by(|a, b| age(a).cmp(&age(b)));
    let mut tls_owner: HashMap<String, (CertId, String)> = HashMap::new();
    let mut default_owner: Option<String> = None;
    // Canaries apply to the routes of the primaries they shadow: set aside, merged below, and every
    // primary route is added to the table after that.
    let (canaries, primaries): (Vec<&Ingress>, Vec<&Ingress>) =
        ours.into_iter().partition(|i| Annotations::new(i.metadata.annotations.as_ref()).is_canary());
    let mut routes: Vec<(PlannedRoute, String, ObjectRef)> = Vec::new();
    // `app-root` is a server-wide `if ($uri = /)` in ingress-nginx: the oldest Ingress's applies to
    // every path of its hosts.
    let mut app_roots: HashMap<String, String> = HashMap::new();
    // `auth-tls-*` is per host too: the oldest Ingress that asks decides, and one whose Secret
    // cannot be used closes the host (ingress-nginx's server-wide `return 403`).
    let mut host_auths: HashMap<String, HostAuthState> = HashMap::new();
    // `server-alias`: more names for a host (its `server_name`), the oldest Ingress's first.
    let mut aliases: Vec<(String, String, ObjectRef)> = Vec::new();
    // `from-to-www-redirect`: the host redirected to, and the route that asked.
    let mut www: Vec<(String, PlannedRoute, String, ObjectRef)> = Vec::new();
    for ingress in primaries {
        let (namespace, name) =
            (namespace_of(&ingress.metadata.namespace), ingress.metadata.name.as_deref().unwrap_or(""));
        let source = format!("{namespace}/{name}");
        let object = ObjectRef::ingress(namespace, name);
        let redirects_by_default = resolver.compiler.config.ssl_redirect;
        if !judge_annotations(ingress, &snapshot.options, redirects_by_default, &object, draft) {
            continue;
        }
        let Some(plan) = planned(resolver.plan(ingress, namespace), &object, "Ingress", draft) else { continue };
        for warning in plan.warnings {
            draft.warn(&object, warning);
        }
        let stray = Annotations::new(ingress.metadata.annotations.as_ref()).stray_canary_annotations();
        if !stray.is_empty() {
            draft.warn(
                &object,
                format!(
                    "{} without canary: \"true\" are ignored; the Ingress is served as a primary",
                    stray.join(", ")
                ),
            );
        }
        if plan.from_to_www {
            for route in plan.routes.iter().filter(|r| !r.host.is_empty() && !r.host.starts_with("*.")) {
                if !www.iter().any(|(to, ..)| *to == route.host) {
                    www.push((route.host.clone(), route.clone(), source.clone(), object.clone()));
                }
            }
        }
        for alias in &plan.aliases {
            for host in plan.routes.iter().map(|r| &r.host).filter(|h| !h.is_empty()) {
                aliases.push((alias.clone(), host.clone(), object.clone()));
            }
        }
        if plan.force_ssl_redirect {
            for route in plan.routes.iter().filter(|r| !r.host.is_empty()) {
                draft.builder.add_ssl_redirect(&route.host, plan.trailing_slash);
            }
        }
        if let Some(root) = &plan.app_root {
            for route in &plan.routes {
                app_roots.entry(route.host.clone()).or_insert_with(|| root.clone());
            }
        }
        if let Some(auth) = &plan.client_auth {
            let hosts: HashSet<&String> = plan.routes.iter().map(|r| &r.host).collect();
            for host in hosts {
                let state = host_auths.entry(host.clone()).or_default();
                match auth {
                    HostAuth::Closed(_) => {
                        state.closed.get_or_insert_with(|| source.clone());
                    }
                    HostAuth::Asks(auth) => match &state.asks {
                        None => state.asks = Some((auth.clone(), source.clone())),
                        Some((kept, owner)) if kept != auth => draft.warn(
                            &object,
                            format!(
                                "the auth-tls annotations for {} are ignored: the older Ingress {owner} sets the \
                                 host's client certificates",
                                if host.is_empty() { "*" } else { host }
                            ),
                        ),
                        Some(_) => {}
                    },
                }
            }
        }
        routes.extend(plan.routes.into_iter().map(|r| (r, source.clone(), object.clone())));
        if let Some(backend) = plan.default_backend {
            match &default_owner {
                Some(owner) => draft.warn(
                    &object,
                    format!("spec.defaultBackend is ignored: the older Ingress {owner} sets the default backend"),
                ),
                None => {
                    draft.builder.set_default_backend(backend, Source { origin: RouteOrigin::Ingress, name: &source });
                    default_owner = Some(source.clone());
                }
            }
        }
        for (host, backend) in plan.passthrough {
            if !draft.builder.add_passthrough(&host, TlsTarget::passthrough(backend, &source)) {
                draft.warn(
                    &object,
                    format!("ssl-passthrough for {host} is ignored: an older Ingress passes it through"),
                );
            }
        }
        for (host, cert) in plan.tls {
            match tls_owner.get(&host) {
                Some((id, _)) if *id == cert.id => {}
                Some((_, owner)) => draft.warn(
                    &object,
                    format!("TLS for {host} is ignored: the older Ingress {owner} gives it another certificate"),
                ),
                None => {
                    draft.builder.add_tls_host(&host, cert.id);
                    tls_owner.insert(host.clone(), (cert.id, source.clone()));
                    draft.certificates.push(cert);
                }
            }
            if plan.ssl_redirect {
                draft.builder.add_ssl_redirect(&host, plan.trailing_slash);
            }
        }
    }
    merge_canaries(&canaries, resolver, &mut routes, draft);
    for (alias, host) in add_aliases(&aliases, &mut routes, draft) {
        if let Some(root) = app_roots.get(&host).cloned() {
            app_roots.entry(alias.clone()).or_insert(root);
        }
        if let Some(auth) = host_auths.get(&host).cloned() {
            host_auths.entry(alias).or_insert(auth);
        }
    }
    let closed_hosts = close_or_ask(&host_auths, resolver, draft);
    add_www_redirects(www, &mut routes);
    // A host where any path is a regex (use-regex, or a rewrite) has every path as a regex
    // location, whatever Ingress declares it (ingress-nginx's `enforceRegexModifier`).
    let regex_hosts: HashSet<String> =
        routes.iter().filter(|(r, _, _)| r.regex).map(|(r, _, _)| r.host.clone()).collect();
    let mut exact_paths: HashMap<String, HashSet<String>> = HashMap::new();
    for (route, _, _) in &routes {
        if route.kind == PathKind::Exact && regex_hosts.contains(&route.host) {
            exact_paths.entry(route.host.clone()).or_default().insert(route.path.clone());
        }
    }
    let no_exact = HashSet::new();
    for (mut route, source, object) in routes {
        match host_auths.get(&route.host) {
            Some(HostAuthState { closed: Some(_), .. }) => {
                route = route.answered_by(closed_hosts.clone());
            }
            Some(HostAuthState { asks: Some((auth, _)), .. }) => route.limits.client_auth = Some(auth.clone()),
            _ => {}
        }
        let policy = route.policy(app_roots.get(&route.host).map(String::as_str));
        let (path, kind) = if regex_hosts.contains(&route.host) {
            let regex = RegexSource { path: &route.path, regex: route.regex, prefix: route.nginx_prefix };
            let path = regex_location(&regex, exact_paths.get(&route.host).unwrap_or(&no_exact));
            if let Err(e) = check_regex_path(&path) {
                let shown = if route.host.is_empty() { "*" } else { &route.host };
                draft.warn(&object, format!("{shown}{}: {e}; this path is ignored", route.path));
                continue;
            }
            (path, PathKind::Regex)
        } else {
            (route.path.clone(), route.kind)
        };
        let source = Source { origin: RouteOrigin::Ingress, name: &source };
        let added = draft.builder.add_route_with_policy(&route.host, &path, kind, route.backend, policy, source);
        if let Err(conflict) = added {
            draft.warn(
                &object,
                format!(
                    "{} ({kind:?}) is already routed by the older Ingress {}; this path is ignored",
                    conflict.key, conflict.kept
                ),
            );
        }
    }
    if default_owner.is_none() {
        set_controller_default_backend(resolver, draft);
    }
}

/// Requests no route matches go to the controller's default backend (`--config`
/// `default-backend-service`) when no Ingress's spec.defaultBackend (nor the routes file) takes
/// them, as ingress-nginx's catch-all server sends them to its `--default-backend-service`.
fn set_controller_default_backend(resolver: &mut Resolver<'_, '_>, draft: &mut Draft) {
    let Some(resolved) = resolver.controller_default_backend() else { return };
    match resolved {
        Ok(backend) if !draft.builder.has_default_backend() => {
            let source = Source { origin: RouteOrigin::Ingress, name: "--config default-backend-service" };
            draft.builder.set_default_backend(backend, source);
        }
        Ok(_) => {}
        Err(e) => {
            let (namespace, name) = resolver.compiler.config.default_backend.clone().unwrap_or_default();
            let object = ObjectRef::new("Service", Some(&namespace), name);
            draft.warn(
                &object,
                format!(
                    "the controller's default backend (--config default-backend-service): {e}; requests no Ingress \
                     matches answer 404, and the Ingresses' error pages pass through"
                ),
            );
        }
    }
}

/// What the Ingresses of one host ask of its clients' certificates: the oldest that asks (and the
/// Ingress), and the oldest whose Secret cannot be used, which closes the host.
#[derive(Default, Clone)]
struct HostAuthState {
    asks: Option<(Arc<ramjet_shared::ClientAuth>, String)>,
    closed: Option<String>,
}

/// Tells the table which hosts' handshakes ask for a certificate, and returns the backend that
/// answers every request of a closed host.
fn close_or_ask(
    host_auths: &HashMap<String, HostAuthState>,
    resolver: &mut Resolver<'_, '_>,
    draft: &mut Draft,
) -> Arc<Backend> {
    for (host, state) in host_auths {
        if let (None, Some((auth, _))) = (&state.closed, &state.asks) {
            draft.builder.add_client_auth(host, auth.clone());
        }
    }
    let kind = BackendKind::Respond(DirectResponse::text(403, "client certificates cannot be checked\n"));
    resolver.compiler.backend("client-certificates:closed", kind)
}

/// Reports every annotation ramjet does not honour ([`annotations::review`]); `false` when the
/// Ingress must not be served at all (access control ramjet cannot enforce).
fn judge_annotations(
    ingress: &Ingress,
    options: &IngressOptions,
    redirects_by_default: bool,
    object: &ObjectRef,
    draft: &mut Draft,
) -> bool {
    let found = ingress.metadata.annotations.as_ref();
    // With a controller configuration whose ssl-redirect is on, TLS hosts redirect as in ingress-nginx.
    let has_tls =
        !redirects_by_default && ingress.spec.as_ref().and_then(|s| s.tls.as_ref()).is_some_and(|tls| !tls.is_empty());
    let nginx_defaults =
        options.controller_name == annotations::NGINX_CONTROLLER || annotations::has_nginx_annotations(found);
    let mut serve = true;
    for finding in annotations::review(found, has_tls, nginx_defaults) {
        let Some(message) = finding.diagnostic() else { continue };
        if finding.verdict == Verdict::RefusedToServe {
            draft.reject(object, message);
            serve = false;
        } else {
            draft.warn(object, message);
        }
    }
    serve
}

/// The plan of an Ingress that resolved, or `None` with every problem reported against `object`
/// (`what` names it in the message: "the Ingress is not served").
fn planned(plan: Result<Plan, Vec<String>>, object: &ObjectRef, what: &str, draft: &mut Draft) -> Option<Plan> {
    match plan {
        Ok(plan) => Some(plan),
        Err(problems) => {
            for problem in problems {
                draft.reject(object, format!("{problem}; the {what} is not served"));
            }
            None
        }
    }
}

/// Serves each alias with every route of its host, as ingress-nginx adds it to the host's
/// `server_name`. An alias that is a host of some Ingress's rules, or already an alias of another
/// host, is ignored with a warning (ingress-nginx ignores it too).
fn add_aliases(
    aliases: &[(String, String, ObjectRef)],
    routes: &mut Vec<(PlannedRoute, String, ObjectRef)>,
    draft: &mut Draft,
) -> Vec<(String, String)> {
    let mut served = Vec::new();
    if aliases.is_empty() {
        return served;
    }
    let hosts: HashSet<String> = routes.iter().map(|(r, _, _)| r.host.clone()).collect();
    let mut taken: HashMap<&str, &str> = HashMap::new();
    for (alias, host, object) in aliases {
        if hosts.contains(alias) {
            draft.warn(object, format!("server-alias {alias} is ignored: it is a host of an Ingress's rules"));
            continue;
        }
        match taken.get(alias.as_str()) {
            Some(owner) if *owner == host.as_str() => continue,
            Some(owner) => {
                draft.warn(object, format!("server-alias {alias} is ignored: it is an alias of {owner} already"));
                continue;
            }
            None => {
                taken.insert(alias, host);
                served.push((alias.clone(), host.clone()));
            }
        }
        let copies: Vec<_> = routes
            .iter()
            .filter(|(r, _, _)| r.host == *host)
            .map(|(r, source, object)| {
                (PlannedRoute { host: alias.clone(), ..r.clone() }, source.clone(), object.clone())
            })
            .collect();
        routes.extend(copies);
    }
    served
}

/// ingress-nginx's `from-to-www-redirect`: for a host `www.a.com`, `a.com` answers every request
/// with a redirect to it, and for `a.com`, `www.a.com` does — unless that name is a host (or an
/// alias) already, as in ingress-nginx.
fn add_www_redirects(
    www: Vec<(String, PlannedRoute, String, ObjectRef)>,
    routes: &mut Vec<(PlannedRoute, String, ObjectRef)>,
) {
    if www.is_empty() {
        return;
    }
    let hosts: HashSet<String> = routes.iter().map(|(r, _, _)| r.host.clone()).collect();
    for (to, route, source, object) in www {
        let from = match to.strip_prefix("www.") {
            Some(bare) => bare.to_string(),
            None => format!("www.{to}"),
        };
        if hosts.contains(&from) {
            continue;
        }
        let redirect = PlannedRoute {
            host: from,
            path: "/".into(),
            kind: PathKind::Prefix,
            nginx_prefix: true,
            regex: false,
            filters: vec![Filter::HostRedirect(to.as_str().into())],
            limits: RouteLimits::default(),
            mirror: None,
            canary: None,
            ..route
        };
        routes.push((redirect, source, object));
    }
}

/// Attaches each canary Ingress's paths to the primary routes with the same host, path and path
/// type — the first (oldest) primary route for that key, which is the one the table keeps. One
/// canary per primary route: a second is reported and ignored, as is a canary path no primary
/// routes.
fn merge_canaries<'s>(
    canaries: &[&'s Ingress],
    resolver: &mut Resolver<'s, '_>,
    routes: &mut [(PlannedRoute, String, ObjectRef)],
    draft: &mut Draft,
) {
    let key = |r: &PlannedRoute| {
        let path = match r.kind {
            PathKind::Exact | PathKind::Regex => r.path.clone(),
            PathKind::Prefix => r.path.trim_end_matches('/').to_string(),
        };
        (r.host.clone(), r.kind, path)
    };
    let mut first: HashMap<(String, PathKind, String), usize> = HashMap::new();
    for (i, (route, _, _)) in routes.iter().enumerate() {
        first.entry(key(route)).or_insert(i);
    }
    for ingress in canaries {
        let (namespace, name) =
            (namespace_of(&ingress.metadata.namespace), ingress.metadata.name.as_deref().unwrap_or(""));
        let source = format!("{namespace}/{name}");
        let object = ObjectRef::ingress(namespace, name);
        let mut problems = Vec::new();
        let mut spec = Annotations::new(ingress.metadata.annotations.as_ref()).canary(&mut problems);
        let total = effective_total(spec.weight_total);
        let auto = AutoPromote::from_annotations(ingress.metadata.annotations.as_ref(), total, &mut problems);
        for problem in problems.drain(..) {
            draft.warn(&object, problem);
        }
        let Some(plan) = planned(resolver.plan(ingress, namespace), &object, "canary", draft) else { continue };
        let backends: BTreeSet<&str> = plan.routes.iter().map(|r| &*r.backend.name).collect();
        let backend = backends.into_iter().collect::<Vec<_>>().join(",");
        if auto.is_some() {
            // Every replica serves the weight the deciding replica wrote; until it has written
            // one (or for another backend, a new version), the canary's own weight.
            let state = ingress.metadata.annotations.as_ref().and_then(|a| a.get(STATE_ANNOTATION));
            if let Some(state) = state.and_then(|s| CanaryState::parse(s)).filter(|s| s.backend == backend) {
                spec.weight = state.served_weight(total);
            }
        }
        let mut series = Vec::new();
        if plan.default_backend.is_some() {
            draft.warn(&object, "spec.defaultBackend of a canary Ingress is not supported; it is ignored");
        }
        if !plan.tls.is_empty() {
            draft.warn(&object, "spec.tls of a canary Ingress is ignored: the primary Ingress's TLS applies");
        }
        for canary in plan.routes {
            let shown = format!("{}{}", if canary.host.is_empty() { "*" } else { &canary.host }, canary.path);
            let Some(&i) = first.get(&key(&canary)) else {
                draft.warn(
                    &object,
                    format!("no primary Ingress routes {shown} ({:?}); this canary path is ignored", canary.kind),
                );
                continue;
            };
            let (primary, primary_source, _) = &mut routes[i];
            if let Some((_, owner)) = &primary.canary {
                draft.warn(
                    &object,
                    format!("{shown} already has the canary {owner} (one canary per route); this path is ignored"),
                );
                continue;
            }
            if primary.backend == canary.backend {
                draft.warn(&object, format!("{shown}: the canary names the primary's own backend; it is ignored"));
                continue;
            }
            let mut problems = Vec::new();
            let affinity = primary.limits.affinity.as_ref().map(|a| &*a.cookie);
            let rules = spec.rules(&primary.backend, &canary.backend, affinity, primary.mirror.as_ref(), &mut problems);
            for problem in problems {
                draft.warn(&object, problem);
            }
            tracing::debug!(canary = %source, primary = %primary_source, route = %shown, "canary merged");
            // `affinity-canary-behavior: legacy`: the canary's answers set no session cookie.
            primary.limits.legacy_canary = affinity.is_some() && spec.legacy_affinity;
            series.push((primary_source.clone(), canary.backend.name.to_string()));
            primary.canary = Some((rules, source.clone()));
        }
        if let Some(settings) = auto.filter(|_| !series.is_empty()) {
            series.sort();
            series.dedup();
            draft.canaries.push(CanaryPlan {
                kind: crate::canary::promotion::CanaryKind::Ingress,
                namespace: namespace.to_string(),
                name: name.to_string(),
                settings,
                total,
                backend,
                series,
            });
        }
    }
}
/// Oldest first; namespace and name break ties (and order objects without a timestamp, such as
/// manifests, which count as older than any object that has one).
fn age(ingress: &Ingress) -> (Option<&Time>, &str, &str) {
    let m = &ingress.metadata;
    (m.creation_timestamp.as_ref(), namespace_of(&m.namespace), m.name.as_deref().unwrap_or(""))
}
/// One Ingress, fully resolved and not yet in the table.
struct Plan {
    routes: Vec<PlannedRoute>,
    default_backend: Option<Arc<Backend>>,
    tls: Vec<(String, Arc<Certificate>)>,
    ssl_redirect: bool,
    /// `app-root`: `/` on the Ingress's hosts answers 302 to it.
    app_root: Option<String>,
    /// `force-ssl-redirect`: every rule host is redirected to HTTPS, TLS or not.
    force_ssl_redirect: bool,
    /// `preserve-trailing-slash`: the HTTPS redirects keep a target's trailing `/`.
    trailing_slash: TrailingSlash,
    /// `server-alias`: more names for the Ingress's hosts.
    aliases: Vec<String>,
    /// `from-to-www-redirect`: `www.<host>` redirects to `<host>` (or the other way round).
    from_to_www: bool,
    /// `ssl-passthrough`: server names whose TLS connections go to this backend unopened.
    passthrough: Vec<(String, Arc<Backend>)>,
    /// `auth-tls-*`: what the Ingress's hosts ask of their clients' certificates.
    client_auth: Option<HostAuth>,
    /// Served anyway, but worth telling (an expired certificate).
    warnings: Vec<String>,
}

#[derive(Clone)]
struct PlannedRoute {
    host: String,
    path: String,
    kind: PathKind,
    /// `pathType: Prefix` (ImplementationSpecific compiles to Prefix too, but ingress-nginx
    /// treats the two differently on a regex host).
    nginx_prefix: bool,
    /// The path is a regular expression (`use-regex`, or a rewrite): its host matches regex paths.
    regex: bool,
    /// What applies to every request of the route: rewrite, request header.
    filters: Vec<Filter>,
    /// Body size limit and upstream timeouts.
    limits: RouteLimits,
    backend: Arc<Backend>,
    mirror: Option<MirrorTarget>,
    /// The rules of the canary merged into this route, and the canary Ingress.
    canary: Option<(Vec<Rule>, String)>,
}

impl PlannedRoute {
    /// The route answered by `backend` alone: what else it asked for no longer applies.
    fn answered_by(self, backend: Arc<Backend>) -> Self {
        PlannedRoute {
            filters: Vec::new(),
            limits: RouteLimits::default(),
            backend,
            mirror: None,
            canary: None,
            ..self
        }
    }

    /// The route's policy: its canary's rules, else its mirror alone, and its filters (with the
    /// host's `app-root`); none when there is nothing.
    fn policy(&self, app_root: Option<&str>) -> Option<Arc<RoutePolicy>> {
        let rules = if let Some((rules, _)) = &self.canary {
            rules.clone()
        } else if let Some(mirror) = &self.mirror {
            vec![Rule::to(vec![], self.backend.clone()).with_filters(vec![Filter::Mirror(mirror.to_mirror())])]
        } else {
            Vec::new()
        };
        let mut filters = self.filters.clone();
        filters.extend(app_root.map(|root| Filter::AppRoot(root.into())));
        if rules.is_empty() && filters.is_empty() && self.limits == RouteLimits::default() {
            return None;
        }
        Some(Arc::new(RoutePolicy::build(rules, filters, self.limits.clone())))
    }
}

/// The zone an Ingress's per-client limits are counted in: a hash of its namespace, name and uid,
/// the same in every generation (ingress-nginx names its zones the same way).
fn limit_zone(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for part in [&meta.namespace, &meta.name, &meta.uid] {
        h.update(part.as_deref().unwrap_or("").as_bytes());
        h.update([0]);
    }
    let digest = h.finalize();
    u64::from_be_bytes(digest[..8].try_into().unwrap_or_default())
}

/// The proxy-ssl-* annotations (after a prefix).
const PROXY_SSL: [&str; 7] = [
    "proxy-ssl-ciphers",
    "proxy-ssl-name",
    "proxy-ssl-protocols",
    "proxy-ssl-secret",
    "proxy-ssl-server-name",
    "proxy-ssl-verify",
    "proxy-ssl-verify-depth",
];

/// The key of a Secret's CA bundle (as ingress-nginx and cert-manager name it).
pub const CA_BUNDLE_KEY: &str = "ca.crt";

/// TLS to an Ingress's backends, before each backend's server name is known.
struct BackendTls {
    verify: Option<Arc<ramjet_shared::CaBundle>>,
    /// `proxy-ssl-name`.
    name: Option<String>,
    sni: bool,
    client_cert: Option<Arc<Certificate>>,
}

impl BackendTls {
    /// The settings for the backend named `backend` (`namespace/service:port`): its server name is
    /// `proxy-ssl-name`, else the Service's DNS name `service.namespace.svc`.
    fn spec_for(&self, backend: &str) -> UpstreamTlsSpec {
        let server_name = self.name.clone().unwrap_or_else(|| service_host(backend));
        UpstreamTlsSpec {
            verify: self.verify.clone(),
            server_name,
            sni: self.sni,
            client_cert: self.client_cert.clone(),
            subject_alt_names: Vec::new(),
        }
    }
}

/// `service.namespace.svc` for a backend named `namespace/service:port` (see
/// [`Resolver::resolve_backend`]).
fn service_host(backend: &str) -> String {
    let (namespace, rest) = backend.split_once('/').unwrap_or(("default", backend));
    let service = rest.rsplit_once(':').map_or(rest, |(s, _)| s);
    format!("{service}.{namespace}.svc")
}

impl<'s> Resolver<'s, '_> {
    /// Everything an Ingress asks for, or every problem that keeps it out of the table.
    fn plan(&mut self, ingress: &'s Ingress, namespace: &'s str) -> Result<Plan, Vec<String>> {
        let mut problems = Vec::new();
        let mut plan = Plan {
            routes: Vec::new(),
            default_backend: None,
            tls: Vec::new(),
            ssl_redirect: false,
            app_root: None,
            force_ssl_redirect: false,
            trailing_slash: TrailingSlash::Drop,
            aliases: Vec::new(),
            from_to_www: false,
            passthrough: Vec::new(),
            client_auth: None,
            warnings: Vec::new(),
        };
        let Some(spec) = &ingress.spec else {
            return Ok(plan);
        };
        let annotations = Annotations::new(ingress.metadata.annotations.as_ref());
        let mut paths = PathAnnotations::read(&annotations, &mut problems, &mut plan.warnings);
        self.apply_config_defaults(&annotations, &mut paths);
        paths.limits.clients = location::client_limits(&annotations, limit_zone(&ingress.metadata), &mut problems);
        let affinity = location::affinity(&annotations, &mut problems);
        paths.limits.hash_by = location::hash_by(&annotations, &mut problems, &mut plan.warnings).map(Arc::new);
        plan.app_root = paths.app_root.clone();
        plan.force_ssl_redirect = paths.force_ssl_redirect;
        if let Some((key, value)) = annotations.get("preserve-trailing-slash") {
            match values::parse_bool(value) {
                Ok(keep) => plan.trailing_slash = if keep { TrailingSlash::Keep } else { TrailingSlash::Drop },
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        if let Some((key, value)) = annotations.get("from-to-www-redirect") {
            match values::parse_bool(value) {
                Ok(b) => plan.from_to_www = b,
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        if let Some((key, value)) = annotations.get("server-alias").filter(|(_, v)| !v.trim().is_empty()) {
            for alias in value.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                match validate_host(alias) {
                    Ok(alias) => plan.aliases.push(alias),
                    Err(e) => problems.push(format!("{key}: {e}")),
                }
            }
        }
        let name = ingress.metadata.name.as_deref().unwrap_or("");
        let redirect = self.redirect(&annotations, namespace, name).unwrap_or_else(|e| {
            problems.push(e);
            None
        });
        // A denied location answers 503 before anything else, as in ingress-nginx's template.
        let auth_fields = self.auth_set_headers(&annotations, namespace);
        let headers_denied = match self.custom_headers(&annotations, namespace) {
            Ok(headers) => {
                paths.limits.response_headers = headers.map(Box::new);
                auth_fields.as_ref().err().cloned()
            }
            Err(why) => Some(why),
        };
        let auth = match headers_denied {
            Some(why) => AuthPlan::Denied(why),
            None => self.basic_auth(&annotations, namespace, &mut plan.warnings),
        };
        let denied = match auth {
            AuthPlan::None => None,
            AuthPlan::Users(users) => {
                paths.limits.auth = Some(users);
                None
            }
            AuthPlan::Denied(why) => {
                plan.warnings
                    .push(format!("{why}; the Ingress's paths answer 503 until it is fixed, as in ingress-nginx"));
                let kind = BackendKind::Respond(DirectResponse::text(503, "service unavailable\n"));
                Some(self.compiler.backend(&format!("{namespace}/{name}:denied"), kind))
            }
        };
        let auth_fields = auth_fields.unwrap_or_default();
        paths.limits.external_auth =
            self.external_auth(&annotations, namespace, auth_fields, &mut problems, &mut plan.warnings);
        plan.client_auth = self.client_auth(&annotations, namespace, &mut problems, &mut plan.warnings);
        if let Some(HostAuth::Closed(why)) = &plan.client_auth {
            plan.warnings.push(why.clone());
        }
        // A redirecting Ingress answers every path itself: its backends are not resolved, as in
        // ingress-nginx, where `return` comes before `proxy_pass`.
        // Services that do not exist: their paths answer 503 (a warning each), as in ingress-nginx;
        // ExternalName Services whose names do not resolve (yet): the same, said as such.
        let mut missing = Vec::new();
        // `service-upstream`: the Service's cluster IP in place of its endpoints.
        let cluster_ip = annotations
            .given("service-upstream")
            .map_or(self.compiler.config.service_upstream, |(_, v)| values::parse_bool(v).unwrap_or(false));
        let mut resolve = |resolver: &mut Self, backend: &'s IngressBackend| match (&denied, &redirect) {
            (Some(answer), _) | (None, Some(answer)) => Ok(answer.clone()),
            (None, None) => {
                let resolved = resolver.backend_or_unavailable(namespace, backend, &mut missing);
                match (cluster_ip, resolved, &backend.service) {
                    (true, Ok(endpoints), Some(service)) => {
                        Ok(resolver.through_cluster_ip(namespace, service, endpoints, &mut missing))
                    }
                    (_, resolved, _) => resolved,
                }
            }
        };
        if let Some(backend) = &spec.default_backend {
            match resolve(self, backend) {
                Ok(b) => plan.default_backend = Some(b),
                Err(e) => problems.push(format!("spec.defaultBackend: {e}")),
            }
        }
        let mirror = self.mirror(&annotations, namespace, &mut plan.warnings);
        let error_backend = self.error_backend(&annotations, namespace, &mut plan.warnings);
        let mut rule_hosts = Vec::new();
        for (i, rule) in spec.rules.iter().flatten().enumerate() {
            let host = match rule.host.as_deref() {
                None | Some("") => String::new(),
                Some(h) => match validate_host(h) {
                    Ok(h) => h,
                    Err(e) => {
                        problems.push(format!("spec.rules[{i}].host: {e}"));
                        continue;
                    }
                },
            };
            if !host.is_empty() {
                rule_hosts.push(host.clone());
            }
            for (j, path) in rule.http.iter().flat_map(|h| h.paths.iter()).enumerate() {
                let at = || format!("spec.rules[{i}].http.paths[{j}]");
                let nginx_prefix = path.path_type == "Prefix";
                let kind = match path.path_type.as_str() {
                    "Exact" => PathKind::Exact,
                    "Prefix" | "ImplementationSpecific" => PathKind::Prefix,
                    "" => {
                        problems
                            .push(format!("{}.pathType is required (Exact, Prefix or ImplementationSpecific)", at()));
                        continue;
                    }
                    other => {
                        problems.push(format!(
                            "{}.pathType: `{other}` is not Exact, Prefix or ImplementationSpecific",
                            at()
                        ));
                        continue;
                    }
                };
                let value = match path.path.as_deref() {
                    None | Some("") => "/",
                    Some(p) => p,
                };
                if let Err(e) = validate_path(value) {
                    problems.push(format!("{}.path: {e}", at()));
                    continue;
                }
                let regex = paths.regex(value);
                if regex {
                    if let Err(e) = check_regex_path(value) {
                        problems.push(format!("{}.path: {e}", at()));
                        continue;
                    }
                }
                let filters = match paths.filters(value) {
                    Ok(f) => f,
                    Err(e) => {
                        problems.push(format!("{}.path: {e}", at()));
                        continue;
                    }
                };
                let mut limits = paths.limits.clone();
                if let Some(affinity) = &affinity {
                    // The cookie's path is the route's own unless the annotation gives one
                    // (ingress-nginx's `location_path`; a regex has none to give).
                    let mut affinity = affinity.clone();
                    if affinity.path.is_empty() {
                        affinity.path = if regex { "/".into() } else { value.into() };
                    }
                    limits.affinity = Some(Arc::new(affinity));
                }
                let mut filters = filters;
                if paths.limits.auth.is_some() {
                    // The backend never sees the client's credentials, as in ingress-nginx.
                    filters.push(Filter::SetRequestHeader { name: "authorization".into(), value: "".into() });
                }
                let resolved = resolve(self, &path.backend).map(|backend| match &error_backend {
                    Some(errors) if redirect.is_none() && denied.is_none() => {
                        let service = path.backend.service.as_ref();
                        let port = service.and_then(|s| s.port.as_ref());
                        let port = port
                            .map(|p| p.number.map_or_else(|| p.name.clone().unwrap_or_default(), |n| n.to_string()));
                        let identity =
                            (namespace, name, service.map_or("", |s| s.name.as_str()), port.as_deref().unwrap_or(""));
                        let (backend, pages) = errors.apply(backend, identity, &mut filters);
                        limits.error_pages = pages;
                        backend
                    }
                    _ => backend,
                });
                match resolved {
                    Ok(backend) => plan.routes.push(PlannedRoute {
                        host: host.clone(),
                        path: value.to_string(),
                        kind,
                        nginx_prefix,
                        regex,
                        filters,
                        limits,
                        backend,
                        mirror: mirror.clone(),
                        canary: None,
                    }),
                    Err(e) => problems.push(format!("{}.backend: {e}", at())),
                }
            }
        }
        plan.warnings.extend(missing);
        let passthrough = annotations.get("ssl-passthrough").filter(|(_, v)| v.trim() == "true");
        if let Some((key, _)) = passthrough {
            // Each rule's host goes to its first path's backend, as ingress-nginx's passthrough does.
            for (i, rule) in spec.rules.iter().flatten().enumerate() {
                let host = rule.host.as_deref().unwrap_or("");
                let first = rule.http.iter().flat_map(|h| h.paths.iter()).next();
                match (validate_host(host), first) {
                    (Ok(host), Some(path)) if !host.starts_with("*.") => match self.backend(namespace, &path.backend) {
                        Ok(backend) => plan.passthrough.push((host, backend)),
                        Err(e) => problems.push(format!("{key}: spec.rules[{i}]: {e}")),
                    },
                    _ => plan.warnings.push(format!(
                        "{key}: spec.rules[{i}] needs a host name (not a wildcard) and a path to pass TLS through; it \
                         is not passed through"
                    )),
                }
            }
        }
        for (i, tls) in spec.tls.iter().flatten().enumerate() {
            let Some(secret) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) else {
                // No secret: the hosts are served with the default certificate, as the spec allows.
                continue;
            };
            // A Secret that is not there yet (cert-manager issues it after the Ingress exists) or is
            // unusable: the Ingress is served, and its hosts get the default certificate meanwhile,
            // as ingress-nginx does; the next generation serves the Secret once it can.
            let cert = match self.certificate(namespace, secret) {
                Ok(cert) => cert,
                Err(e) => {
                    plan.warnings.push(format!(
                        "spec.tls[{i}]: {e}; its hosts get the default certificate until the Secret can be served"
                    ));
                    continue;
                }
            };
            if is_expired(&cert) {
                plan.warnings
                    .push(format!("spec.tls[{i}]: the certificate in Secret {namespace}/{secret} has expired"));
            }
            // Without hosts, the certificate serves every host of this Ingress's rules.
            let hosts: Vec<String> = match &tls.hosts {
                Some(hosts) if !hosts.is_empty() => {
                    let mut valid = Vec::new();
                    for host in hosts {
                        match validate_host(host) {
                            Ok(h) => valid.push(h),
                            Err(e) => problems.push(format!("spec.tls[{i}].hosts: {e}")),
                        }
                    }
                    valid
                }
                _ => rule_hosts.clone(),
            };
            plan.tls.extend(hosts.into_iter().map(|h| (h, cert.clone())));
        }
        let annotations = ingress.metadata.annotations.as_ref();
        // The Ingress's own ssl-redirect, else the controller configuration's (`--config`).
        plan.ssl_redirect = SSL_REDIRECT_ANNOTATIONS
            .iter()
            .find_map(|a| annotations.and_then(|m| m.get(*a)))
            .map_or(self.compiler.config.ssl_redirect, |v| v.trim().eq_ignore_ascii_case("true"));
        // The backends' protocol: every backend of this Ingress speaks it (over TLS as the
        // proxy-ssl-* annotations say, for HTTPS and GRPCS).
        let protocol =
            BACKEND_PROTOCOL_ANNOTATIONS.iter().find_map(|a| annotations.and_then(|m| m.get(*a)).map(|v| (a, v)));
        let protocol = match protocol {
            None => BackendProtocol::Http1,
            Some((key, value)) => BackendProtocol::parse(value.trim()).unwrap_or_else(|e| {
                problems.push(format!("{key}: {e}"));
                BackendProtocol::Http1
            }),
        };
        let ssl = Annotations::new(annotations);
        let tls = if protocol.is_tls() {
            self.backend_tls(&ssl, namespace).map_err(|e| problems.push(e)).ok()
        } else {
            let given: Vec<String> = PROXY_SSL.iter().filter_map(|n| ssl.get(n).map(|(key, _)| key)).collect();
            if !given.is_empty() {
                plan.warnings.push(format!(
                    "{} apply to HTTPS and GRPCS backends only; this Ingress's backends speak plain {}, so they \
                     have no effect",
                    given.join(", "),
                    if protocol.is_h2() { "HTTP/2" } else { "HTTP/1.1" }
                ));
            }
            None
        };
        if protocol != BackendProtocol::Http1 && (tls.is_some() || !protocol.is_tls()) {
            let mut speak = |backend: &Arc<Backend>| -> Result<Arc<Backend>, String> {
                let upstream = match &tls {
                    Some(settings) => Some(self.compiler.upstream_tls(&settings.spec_for(&backend.name))?),
                    None => None,
                };
                Ok(self.compiler.speaking(backend, protocol, upstream))
            };
            for route in &mut plan.routes {
                match speak(&route.backend) {
                    Ok(b) => route.backend = b,
                    Err(e) => problems.push(format!("proxy-ssl-name: {e}")),
                }
            }
            if let Some(backend) = &mut plan.default_backend {
                match speak(backend) {
                    Ok(b) => *backend = b,
                    Err(e) => problems.push(format!("proxy-ssl-name: {e}")),
                }
            }
        }
        if problems.is_empty() {
            Ok(plan)
        } else {
            Err(problems)
        }
    }

    /// What the controller configuration (`--config`) gives a route whose annotations do not say:
    /// the body limit, the proxy timeouts and `force-ssl-redirect`.
    fn apply_config_defaults(&self, annotations: &Annotations<'_>, paths: &mut PathAnnotations) {
        let config = &self.compiler.config;
        let defaults = &config.route_defaults;
        let limits = &mut paths.limits;
        for (key, slot, default) in [
            ("proxy-connect-timeout", &mut limits.connect_timeout, defaults.connect_timeout),
            ("proxy-send-timeout", &mut limits.send_timeout, defaults.send_timeout),
            ("proxy-read-timeout", &mut limits.read_timeout, defaults.read_timeout),
        ] {
            if annotations.given(key).is_none() {
                *slot = default;
            }
        }
        if annotations.given("proxy-body-size").is_none() {
            limits.max_body = defaults.max_body;
        }
        if annotations.given("force-ssl-redirect").is_none() {
            paths.force_ssl_redirect = config.force_ssl_redirect;
        }
    }

    /// TLS to the Ingress's backends, from the proxy-ssl-* annotations (ramjet's names first, then
    /// ingress-nginx's), with ingress-nginx's defaults: encrypt without verifying, no SNI.
    /// `proxy-ssl-secret` (`namespace/name` or `name`, in the Ingress's namespace) names a Secret
    /// whose `ca.crt` the backends' certificates are verified against when `proxy-ssl-verify` is
    /// `on`; `proxy-ssl-name` is the name verified (and sent as SNI with `proxy-ssl-server-name:
    /// on`), else each backend's Service DNS name.
    fn backend_tls(&mut self, ssl: &Annotations<'s>, namespace: &'s str) -> Result<BackendTls, String> {
        let on = |name| ssl.get(name).is_some_and(|(_, v)| v.trim().eq_ignore_ascii_case("on"));
        let verify = on("proxy-ssl-verify");
        let mut client_cert = None;
        let ca = match ssl.get("proxy-ssl-secret") {
            None => None,
            Some((key, value)) => {
                let value = value.trim();
                let (secret_namespace, name) = value.split_once('/').unwrap_or((namespace, value));
                if secret_namespace != namespace {
                    return Err(format!(
                        "{key}: the Secret {value} is in another namespace; only the Ingress's own namespace \
                         ({namespace}) is allowed, as in ingress-nginx"
                    ));
                }
                let Some(secret) = self.secret(secret_namespace, name) else {
                    return Err(format!(
                        "{key}: Secret {namespace}/{name} does not exist (or is not of type {TLS_SECRET_TYPE} or \
                         {OPAQUE_SECRET_TYPE})"
                    ));
                };
                let data = secret.data.as_ref();
                let pem = data.and_then(|d| d.get(CA_BUNDLE_KEY)).map(|b| b.0.as_slice());
                let Some(pem) = pem else {
                    return Err(format!("{key}: Secret {namespace}/{name} has no {CA_BUNDLE_KEY}"));
                };
                let source = format!("{namespace}/{name}");
                // The certificate and key, presented to backends that ask for a client certificate;
                // a Secret with the CA bundle alone presents none.
                if secret.type_.as_deref() == Some(TLS_SECRET_TYPE) {
                    client_cert = Some(self.certificate(namespace, name).map_err(|e| format!("{key}: {e}"))?);
                }
                Some(self.compiler.ca_bundle(pem, &source).map_err(|e| format!("{key}: Secret {source}: {e}"))?)
            }
        };
        let verify = match (verify, ca) {
            (false, _) => None,
            (true, Some(ca)) => Some(ca),
            (true, None) => {
                return Err("proxy-ssl-verify is on but there is no proxy-ssl-secret with a ca.crt to verify the \
                            backends' certificates against"
                    .into())
            }
        };
        let name = ssl.get("proxy-ssl-name").map(|(_, v)| v.trim().to_string()).filter(|v| !v.is_empty());
        Ok(BackendTls { verify, name, sni: on("proxy-ssl-server-name"), client_cert })
    }

    /// ingress-nginx's redirects (or their `ramjet.dev/` names): `temporal-redirect` (302, or
    /// `temporal-redirect-code` in 300–307) wins over `permanent-redirect` (301, or
    /// `permanent-redirect-code` in 300–308); every path of the Ingress answers with it.
    fn redirect(
        &mut self,
        annotations: &Annotations<'_>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Backend>>, String> {
        let given = |n| annotations.get(n).filter(|(_, v)| !v.trim().is_empty());
        let ((key, target), code, default, max) = match (given("temporal-redirect"), given("permanent-redirect")) {
            (Some(t), _) => (t, "temporal-redirect-code", 302, 307),
            (None, Some(p)) => (p, "permanent-redirect-code", 301, 308),
            (None, None) => return Ok(None),
        };
        let location = values::redirect_location(target).map_err(|e| format!("{key}: {e}"))?;
        let status = annotations
            .get(code)
            .and_then(|(_, v)| v.trim().parse::<u16>().ok())
            .filter(|c| (300..=max).contains(c))
            .unwrap_or(default);
        // nginx makes a path absolute on the request's scheme and host (`absolute_redirect`), unless
        // `relative-redirects` turns that off.
        let relative = annotations.get("relative-redirects").is_some_and(|(_, v)| values::parse_bool(v) == Ok(true));
        let response = if location.starts_with('/') && !relative {
            DirectResponse::redirect_on_request_host(status, location)
        } else {
            DirectResponse::redirect(status, location)
        };
        let kind = BackendKind::Respond(response);
        Ok(Some(self.compiler.backend(&format!("{namespace}/{name}:redirect"), kind)))
    }

    /// The Ingress's mirror: `ramjet.dev/mirror-backend` (`service:port`) or ingress-nginx's
    /// `mirror-target` (an `http://` URL: a Service of the cluster, or any other host by its address
    /// or DNS name, also over `https://`, verified against the Mozilla roots; its path, if it has
    /// one, in place of the request's), with `mirror-percent`,
    /// `mirror-request-body` and `mirror-host`. A mirror that cannot be used is reported and left
    /// out; the routes are served without it.
    fn mirror(
        &mut self,
        annotations: &Annotations<'_>,
        namespace: &str,
        warnings: &mut Vec<String>,
    ) -> Option<MirrorTarget> {
        let mut path = None;
        let (service, port, key) = if let Some((key, value)) = annotations.get("mirror-backend") {
            match value.trim().rsplit_once(':') {
                Some((service, port)) if !service.is_empty() && !port.is_empty() => {
                    (service.to_string(), port.to_string(), key)
                }
                _ => {
                    warnings.push(format!("{key}: `{value}` is not service:port; no mirror"));
                    return None;
                }
            }
        } else if let Some((key, value)) = annotations.get("mirror-target") {
            let url = match MirrorUrl::parse(value.trim()) {
                Ok(url) => url,
                Err(e) => {
                    warnings.push(format!("{key}: {e}; no mirror"));
                    return None;
                }
            };
            path = url.path.clone();
            let in_cluster = url.host.ends_with(".svc") || url.host.ends_with(".svc.cluster.local");
            match url.service(namespace).filter(|(s, ns)| in_cluster || self.service(ns, s).is_some()) {
                Some(_) if url.https => {
                    warnings.push(format!(
                        "{key}: `{value}`: a Service of the cluster is mirrored in plain HTTP: use http://; no mirror"
                    ));
                    return None;
                }
                Some((service, target_namespace)) => {
                    (format!("{service}.{target_namespace}"), url.port.to_string(), key)
                }
                None => match self.external_host("mirror", &url.host, url.port.into(), url.https) {
                    Ok(backend) => return Some(self.mirror_options(annotations, backend, path, warnings)),
                    Err(e) => {
                        warnings.push(format!("{key}: {e}; no mirror"));
                        return None;
                    }
                },
            }
        } else {
            return None;
        };
        let (service, target_namespace) = match service.split_once('.') {
            Some((s, ns)) => (s.to_string(), ns.to_string()),
            None => (service, namespace.to_string()),
        };
        let port_ref = match port.parse::<i32>() {
            Ok(n) => PortRef::Number(n),
            Err(_) => PortRef::Name(&port),
        };
        let service_backend = IngressServiceBackend { name: service, port: None };
        let backend = match self.resolve_backend(&target_namespace, &service_backend, port_ref) {
            Ok(b) => b,
            Err(e) => {
                warnings.push(format!("{key}: {e}; no mirror"));
                return None;
            }
        };
        Some(self.mirror_options(annotations, backend, path, warnings))
    }

    /// A mirror to `backend` with the Ingress's `mirror-percent`, `mirror-request-body` and
    /// `mirror-host`.
    fn mirror_options(
        &self,
        annotations: &Annotations<'_>,
        backend: Arc<Backend>,
        path: Option<String>,
        warnings: &mut Vec<String>,
    ) -> MirrorTarget {
        let percent = match annotations.get("mirror-percent") {
            None => 100,
            Some((key, v)) => match v.trim().parse::<u8>() {
                Ok(p) if p <= 100 => p,
                _ => {
                    warnings.push(format!("{key}: `{v}` is not a percentage (0-100); 100 is used"));
                    100
                }
            },
        };
        let body = match annotations.get("mirror-request-body") {
            None => true,
            Some((_, v)) if v.trim() == "on" || v.trim() == "true" => true,
            Some((_, v)) if v.trim() == "off" || v.trim() == "false" => false,
            Some((key, v)) => {
                warnings.push(format!("{key}: `{v}` is not `on` or `off`; `on` is used"));
                true
            }
        };
        let host = annotations.get("mirror-host").map(|(_, v)| v.trim().to_string()).filter(|h| !h.is_empty());
        MirrorTarget { backend, percent, body, host, path }
    }

    /// [`Resolver::backend`], except that a Service that does not exist is a backend without
    /// endpoints (its requests answer 503, or the `default-backend` annotation's error backend
    /// does), as ingress-nginx serves it; `missing` learns why, for the Ingress's warning.
    fn backend_or_unavailable(
        &mut self,
        namespace: &'s str,
        backend: &'s IngressBackend,
        missing: &mut Vec<String>,
    ) -> Result<Arc<Backend>, String> {
        let resolved = self.backend(namespace, backend);
        let Err(why) = &resolved else {
            // An ExternalName Service whose name does not resolve (yet) says so on the Ingress.
            if let Some(service) = &backend.service {
                let key = ("Service", Some(namespace.to_string()), service.name.clone());
                if let Some(note) = self.dns_notes.get(&key) {
                    let note = format!("Service {namespace}/{}: {note}", service.name);
                    if !missing.contains(&note) {
                        missing.push(note);
                    }
                }
            }
            return resolved;
        };
        let Some(service) = backend.service.as_ref().filter(|s| self.service(namespace, &s.name).is_none()) else {
            return resolved;
        };
        let port = service.port.as_ref().map_or(String::new(), |p| match (p.number, &p.name) {
            (Some(n), _) => n.to_string(),
            (None, name) => name.clone().unwrap_or_default(),
        });
        let note = format!("{why}: its paths answer 503 until it does, as in ingress-nginx");
        if !missing.contains(&note) {
            missing.push(note);
        }
        let name = format!("{namespace}/{}:{port}", service.name);
        Ok(self.compiler.backend(&name, BackendKind::Endpoints(Box::new([]))))
    }

    /// `service-upstream`: the Service's cluster IP on the Service port, one endpoint that the
    /// cluster balances, as ingress-nginx's upstream then is. A Service without one (headless, or
    /// an ExternalName) keeps `endpoints`, said in `notes`.
    fn through_cluster_ip(
        &mut self,
        namespace: &str,
        reference: &IngressServiceBackend,
        endpoints: Arc<Backend>,
        notes: &mut Vec<String>,
    ) -> Arc<Backend> {
        let Some(spec) = self.service(namespace, &reference.name).and_then(|s| s.spec.as_ref()) else {
            return endpoints;
        };
        let name = &reference.name;
        let ip = spec.cluster_ip.as_deref().and_then(|ip| ip.parse::<std::net::IpAddr>().ok());
        let Some(ip) = ip.filter(|_| spec.type_.as_deref() != Some("ExternalName")) else {
            let note =
                format!("service-upstream: Service {namespace}/{name} has no cluster IP; its endpoints are used");
            if !notes.contains(&note) {
                notes.push(note);
            }
            return endpoints;
        };
        let wanted = reference.port.as_ref();
        let port = spec.ports.iter().flatten().find(|p| match wanted.and_then(|w| w.number) {
            Some(n) => p.port == n,
            None => p.name.is_some() && p.name == wanted.and_then(|w| w.name.clone()),
        });
        let Some(port) = port.and_then(|p| u16::try_from(p.port).ok()) else { return endpoints };
        let kind = BackendKind::Endpoints(Box::new([std::net::SocketAddr::new(ip, port)]));
        self.compiler.backend(&format!("{namespace}/{name}:{port}@cluster-ip"), kind)
    }

    fn backend(&mut self, namespace: &'s str, backend: &'s IngressBackend) -> Result<Arc<Backend>, String> {
        let Some(service) = &backend.service else {
            return Err(match &backend.resource {
                Some(r) => format!("resource backends ({} {}) are not supported; use a Service", r.kind, r.name),
                None => "the backend names no Service".to_string(),
            });
        };
        let port = match &service.port {
            Some(p) => match (p.number, p.name.as_deref()) {
                (Some(n), _) => PortRef::Number(n),
                (None, Some(name)) if !name.is_empty() => PortRef::Name(name),
                _ => return Err(format!("the backend for Service {} names no port", service.name)),
            },
            None => return Err(format!("the backend for Service {} names no port", service.name)),
        };
        self.service_backend(namespace, service, port)
    }
}

/// A `mirror-target` URL: `http(s)://<host>[:port][/path]`. The path is the copies' own, or the
/// request's for `/$request_uri` (or none).
#[derive(Debug, PartialEq, Eq)]
struct MirrorUrl {
    host: String,
    port: u16,
    path: Option<String>,
    /// `https://`: copies go over TLS, the host's certificate verified.
    https: bool,
}

impl MirrorUrl {
    fn parse(url: &str) -> Result<MirrorUrl, String> {
        let (https, rest) = match url.split_once("://") {
            Some(("http", rest)) => (false, rest),
            Some(("https", rest)) => (true, rest),
            _ => return Err(format!("`{url}` is not an http:// or https:// URL")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let path = match path {
            "" | "/" | "/$request_uri" => None,
            p if p.contains('$') => {
                return Err(format!("`{url}`: of nginx's variables only `/$request_uri` is supported"))
            }
            p => {
                validate_path(p).map_err(|e| format!("`{url}`: the path {e}"))?;
                Some(p.to_string())
            }
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().map_err(|_| format!("`{url}`: `{p}` is not a port"))?),
            None => (authority, if https { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(format!("`{url}` names no host"));
        }
        Ok(MirrorUrl { host: host.to_ascii_lowercase(), port, path, https })
    }

    /// The Service (name, namespace) the host names, if it has a Service's shape:
    /// `service[.namespace[.svc[.cluster.local]]]`.
    fn service(&self, namespace: &str) -> Option<(String, String)> {
        let host = self.host.trim_end_matches(".cluster.local").trim_end_matches(".svc");
        match host.split_once('.') {
            None => Some((host.to_string(), namespace.to_string())),
            Some((s, ns)) if !ns.contains('.') => Some((s.to_string(), ns.to_string())),
            Some(_) => None,
        }
    }
}

/// A path as the Ingress spec allows it: absolute, without whitespace, query or fragment.
fn validate_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("`{path}` must start with `/`"));
    }
    if path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'?' || b == b'#') {
        return Err(format!("`{path}` contains whitespace, `?` or `#`"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
