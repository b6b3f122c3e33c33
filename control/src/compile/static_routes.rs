//! Compiling a static routes file (read by [`crate::routes_file`]): the same vocabulary as an
//! Ingress, without a cluster; its `tcp:`, `udp:` and `tlsPorts:` entries become the same table
//! entries as the Gateway API's TCP, UDP and TLS listeners on ports of their own. Endpoints
//! given by name take the addresses DNS last answered ([`crate::dns`]); the draft names them, so
//! that they are kept fresh.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use ramjet_shared::{
    BackendKind, BackendProtocol, Filter, ObjectRef, PathKind, PortRoute, RoutePolicy, Rule, TlsTarget, Transport,
    WeightedBackend,
};

use super::{Compiler, Draft};
use crate::canary::MirrorTarget;
use crate::routes_file::{BackendSpec, EndpointAddr, PortSpec, StaticRoutes};

/// The kind diagnostics give an entry of the static routes file: `StaticRoutes routes[2]`.
pub const STATIC_ROUTES: &str = "StaticRoutes";

/// Compiles a parsed static routes file into a draft.
pub fn compile(routes: &StaticRoutes, compiler: &mut Compiler) -> Draft {
    let mut draft = Draft::default();
    // TLS to the backends that ask for it. The settings were checked when the file was read; a
    // backend whose TLS cannot be set up anyway gets no endpoints (503), never plain text.
    let mut tls_of = HashMap::new();
    for (name, spec) in &routes.backends {
        if let BackendSpec::Endpoints(_, _, Some(tls)) = spec {
            match compiler.upstream_tls(&tls.0) {
                Ok(tls) => tls_of.insert(name.as_str(), tls),
                Err(e) => {
                    let object = ObjectRef::new(STATIC_ROUTES, None, format!("backends.{name}"));
                    draft.reject(&object, format!("tls: {e}; the backend has no endpoints"));
                    continue;
                }
            };
        }
    }
    let addresses = resolved_endpoints(routes, compiler, &mut draft);
    let backend = |compiler: &mut Compiler, name: &str| {
        let (kind, protocol, tls) = match &routes.backends[name] {
            BackendSpec::Endpoints(_, protocol, _) => {
                let tls = tls_of.get(name).cloned();
                let addrs = if protocol.is_tls() && tls.is_none() { Vec::new() } else { addresses[name].clone() };
                (BackendKind::Endpoints(addrs.into_boxed_slice()), *protocol, tls)
            }
            BackendSpec::Respond { status, body } => {
                let b = ramjet_shared::Backend::respond(name, 0, *status, body.clone());
                (b.kind, BackendProtocol::Http1, None)
            }
        };
        compiler.backend_over(name, kind, protocol, tls)
    };
    for (i, rule) in routes.routes.iter().enumerate() {
        let target = backend(compiler, &rule.backend);
        let source = format!("routes[{i}]");
        let kind = if rule.exact { PathKind::Exact } else { PathKind::Prefix };
        let mirror = rule.mirror.as_ref().map(|m| MirrorTarget {
            backend: backend(compiler, &m.backend),
            percent: m.percent,
            body: m.body,
            host: m.host.clone(),
            path: None,
        });
        let policy = match (&rule.canary, &mirror) {
            (Some((name, spec)), _) => {
                let canary = backend(compiler, name);
                let mut problems = Vec::new();
                let rules = spec.rules(&target, &canary, None, mirror.as_ref(), &mut problems);
                for problem in problems {
                    draft.warn(&ObjectRef::new(STATIC_ROUTES, None, source.clone()), problem);
                }
                Some(Arc::new(RoutePolicy::new(rules)))
            }
            (None, Some(m)) => {
                let rule = Rule::to(vec![], target.clone()).with_filters(vec![Filter::Mirror(m.to_mirror())]);
                Some(Arc::new(RoutePolicy::new(vec![rule])))
            }
            (None, None) => None,
        };
        if let Err(conflict) =
            draft.builder.add_route_with_policy(&rule.host, &rule.path, kind, target, policy, source.as_str())
        {
            draft.reject(
                &ObjectRef::new(STATIC_ROUTES, None, source),
                format!("{} is already routed by {}; this rule is ignored", conflict.key, conflict.kept),
            );
        }
    }
    if let Some(name) = &routes.default_backend {
        let target = backend(compiler, name);
        draft.builder.set_default_backend(target, "defaultBackend");
    }
    for (i, tls) in routes.tls.iter().enumerate() {
        let cert: Arc<_> = compiler.certificate(&tls.certificate);
        for host in &tls.hosts {
            if !draft.builder.add_tls_host(host, cert.id) {
                draft.warn(
                    &ObjectRef::new(STATIC_ROUTES, None, format!("tls[{i}]")),
                    format!("{host} already has a certificate; this one is ignored"),
                );
            }
            if tls.ssl_redirect {
                draft.builder.add_ssl_redirect(host, ramjet_shared::TrailingSlash::Keep);
            }
        }
        draft.certificates.push(cert);
    }
    let entries = routes.tcp.iter().map(|e| (Transport::Tcp, e)).enumerate();
    let udp = routes.udp.iter().map(|e| (Transport::Udp, e)).enumerate();
    for (i, (transport, entry)) in entries.chain(udp) {
        let source = format!("{transport}[{i}]");
        let Some(backends) = relayed(routes, entry, &source, compiler, &mut draft) else { continue };
        let route = PortRoute::new(backends, &source);
        if let Err(held) = draft.builder.add_port_route(transport, entry.port, route) {
            let object = ObjectRef::new(STATIC_ROUTES, None, source);
            draft.reject(&object, format!("port {} is already routed by {held}; this entry is ignored", entry.port));
        }
    }
    for (i, entry) in routes.tls_ports.iter().enumerate() {
        let source = format!("tlsPorts[{i}]");
        let Some(backends) = relayed(routes, &entry.relay, &source, compiler, &mut draft) else { continue };
        let terminate = entry.terminate.as_ref().map(|cert| {
            let cert = compiler.certificate(cert);
            draft.certificates.push(cert.clone());
            cert.id
        });
        let port = entry.relay.port;
        for host in &entry.hostnames {
            let target = TlsTarget { terminate, route: PortRoute::new(backends.clone(), &source) };
            if let Err(held) = draft.builder.add_tls_port_name(port, host, target) {
                let name = if host.is_empty() { "any server name" } else { host };
                let object = ObjectRef::new(STATIC_ROUTES, None, source.clone());
                draft.reject(&object, format!("{name} on port {port} is already routed by {held}; not by this entry"));
            }
        }
    }
    draft
}

/// The weighted backends of a Layer-4 entry (`tcp[0]`, `tlsPorts[1]`), each a plain `endpoints`
/// backend, as the file was checked to have them; `None` (the entry is rejected) otherwise.
fn relayed(
    routes: &StaticRoutes,
    entry: &PortSpec,
    source: &str,
    compiler: &mut Compiler,
    draft: &mut Draft,
) -> Option<Vec<WeightedBackend>> {
    let mut backends = Vec::new();
    for (name, weight) in &entry.backends {
        let BackendSpec::Endpoints(written, BackendProtocol::Http1, _) = &routes.backends[name] else {
            let message =
                format!("backend {name}: a Layer-4 entry relays to plain `endpoints` (no `respond`, no protocol)");
            draft.reject(&ObjectRef::new(STATIC_ROUTES, None, source), message);
            return None;
        };
        let kind = BackendKind::Endpoints(endpoints_of(name, written, compiler, draft).into_boxed_slice());
        let target = compiler.backend_over(name, kind, BackendProtocol::Http1, None);
        backends.push(WeightedBackend::new(target, *weight));
    }
    Some(backends)
}

/// Every `endpoints` backend's addresses, by backend name ([`endpoints_of`]).
fn resolved_endpoints(
    routes: &StaticRoutes,
    compiler: &Compiler,
    draft: &mut Draft,
) -> HashMap<String, Vec<SocketAddr>> {
    let mut resolved = HashMap::new();
    for (name, spec) in &routes.backends {
        if let BackendSpec::Endpoints(written, _, _) = spec {
            resolved.insert(name.clone(), endpoints_of(name, written, compiler, draft));
        }
    }
    resolved
}

/// The addresses of backend `name`'s endpoints as `written`: an address as it is, a name as DNS
/// last answered it (recorded in the draft, so that it is kept fresh). A name without an answer
/// yet adds nothing; one whose lookups fail keeps its last answer; either is said once per name.
fn endpoints_of(name: &str, written: &[EndpointAddr], compiler: &Compiler, draft: &mut Draft) -> Vec<SocketAddr> {
    let mut addrs = Vec::new();
    for endpoint in written {
        let (host, port) = match endpoint {
            EndpointAddr::Addr(addr) => {
                addrs.push(*addr);
                continue;
            }
            EndpointAddr::Name(host, port) => (host, *port),
        };
        draft.dns_names.insert(host.clone());
        let object = ObjectRef::new(STATIC_ROUTES, None, format!("backends.{name}"));
        let said =
            |draft: &Draft| draft.diagnostics.iter().any(|d| d.object == object && d.message.contains(host.as_str()));
        match compiler.dns.get(host) {
            None => {
                if !said(draft) {
                    draft.warn(&object, format!("{host} is being resolved; it has no addresses until it is"));
                }
            }
            Some(answer) => {
                if answer.failing && !said(draft) {
                    let message = match answer.addrs.is_empty() {
                        true => format!("{host} does not resolve; it has no addresses until it does"),
                        false => format!("looking {host} up fails (the log says why); its last answer is kept"),
                    };
                    draft.warn(&object, message);
                }
                addrs.extend(answer.addrs.iter().map(|ip| SocketAddr::new(*ip, port)));
            }
        }
    }
    addrs.sort();
    addrs.dedup();
    addrs
}
