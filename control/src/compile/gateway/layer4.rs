//! The Gateway API's Layer-4 routes: TCPRoutes and UDPRoutes on ports of their own, TLSRoutes by
//! server name (on ramjet's HTTPS port, or a TLS port of its own), and which Gateway's listener
//! holds a port when several ask for it.

use super::*;

/// A port of its own has one kind of listener. Of two Gateways' TCP (UDP) listeners on the same
/// port, the older Gateway's keeps it and the other is refused (`PortUnavailable`), never served
/// by both; TLS listeners share a port by server name, but not with a TCP listener
/// (`ProtocolConflict`).
pub(super) fn refuse_shared_l4_ports(
    listeners: &mut Vec<ServedListener<'_>>,
    https_ports: &[u16],
    report: &mut Report,
    draft: &mut Draft,
) {
    // By port, UDP or not: the Gateway and protocol of the first listener on it.
    let mut holder: HashMap<(bool, i32), (usize, &str)> = HashMap::new();
    let mut refused = Vec::new();
    listeners.retain(|l| {
        let (protocol, port) = (l.listener.protocol.as_str(), l.listener.port);
        let own_tls = protocol == "TLS" && !https_ports.iter().any(|&p| i32::from(p) == port);
        if !matches!(protocol, "TCP" | "UDP") && !own_tls {
            return true;
        }
        let (gateway, held) = *holder.entry((protocol == "UDP", port)).or_insert((l.at.0, protocol));
        let shared = held == protocol && (gateway == l.at.0 || protocol == "TLS");
        if !shared {
            refused.push((l.at, gateway, held.to_string(), protocol, port));
        }
        shared
    });
    for ((gateway, listener), held_by, held, protocol, port) in refused {
        let other = &report.gateways[held_by];
        let (reason, message) = if held == protocol {
            let message = format!(
                "{protocol} port {port} is taken by a listener of the older Gateway {}/{}",
                other.namespace, other.name
            );
            ("PortUnavailable", message)
        } else {
            let message =
                format!("port {port} is taken by a {held} listener of Gateway {}/{}", other.namespace, other.name);
            ("ProtocolConflict", message)
        };
        let g = &mut report.gateways[gateway];
        draft.warn(
            &ObjectRef::new("Gateway", Some(&g.namespace), &g.name),
            format!("listener {}: {message}", g.listeners[listener].name),
        );
        g.listeners[listener].port = None;
        g.listeners[listener].conditions = vec![
            StatusCondition::new("Accepted", false, reason, message.clone()),
            StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", ""),
            StatusCondition::new("Programmed", false, "Invalid", message),
        ];
        g.conditions[0] = StatusCondition::new("Accepted", true, "ListenersNotValid", "some listeners are not served");
    }
}

/// Compiles the TCPRoutes (UDPRoutes) attached to our TCP (UDP) listeners: each listener's port
/// relays to the backends of the oldest route attached to it (every attached route is `Accepted`,
/// as the spec has it; the newer ones get no connections, and are warned).
pub(super) fn port_routes<'s>(
    transport: Transport,
    snapshot: &'s ClusterSnapshot,
    to: Parents<'_, 's>,
    refs: &Refs<'_>,
    resolver: &mut Resolver<'s, '_>,
    draft: &mut Draft,
    report: &mut Report,
) {
    let (kind, mut routes): (&'static str, Vec<(&ObjectMeta, &TcpRouteSpec)>) = match transport {
        Transport::Tcp => (TCP_ROUTE, snapshot.tcp_routes.iter().map(|r| (&r.metadata, &r.spec)).collect()),
        Transport::Udp => (UDP_ROUTE, snapshot.udp_routes.iter().map(|r| (&r.metadata, &r.spec)).collect()),
        // TLSRoutes go by server name: `tls_routes`.
        Transport::Tls => return,
    };
    routes.sort_by(|a, b| age(a.0).cmp(&age(b.0)));
    for (metadata, spec) in routes {
        let route = (kind, metadata, &spec.parent_refs[..], &[][..], &spec.rules[..]);
        let Some(Attached { object, source, found, backends }) = attach_route(route, to, refs, resolver, draft, report)
        else {
            continue;
        };
        // Without a backend to relay to, the port refuses its connections (it is not opened).
        if backends.iter().all(|b| b.weight == 0) {
            continue;
        }
        let mut ports: Vec<u16> = found.iter().map(|(l, _)| l.listener.port as u16).collect();
        ports.sort_unstable();
        ports.dedup();
        for port in ports {
            let route = PortRoute::new(backends.clone(), &source);
            if let Err(held) = draft.builder.add_port_route(transport, port, route) {
                draft.warn(
                    &object,
                    format!("port {port} relays to the older {kind} {held}; this one gets no connections"),
                );
            }
        }
    }
}

/// Compiles the TLSRoutes attached to our TLS listeners: each server name the route and the
/// listener have in common goes to the route's backends, split by weight. The listener passes the
/// name's connections through or terminates them with its certificate, on a port of its own or on
/// ramjet's HTTPS port beside HTTPS. The first route (the oldest) to claim a name on a port keeps
/// it.
pub(super) fn tls_routes<'s>(
    snapshot: &'s ClusterSnapshot,
    to: Parents<'_, 's>,
    refs: &Refs<'_>,
    resolver: &mut Resolver<'s, '_>,
    draft: &mut Draft,
    report: &mut Report,
) {
    let mut routes: Vec<&TlsRoute> = snapshot.tls_routes.iter().map(|r| &**r).collect();
    routes.sort_by(|a, b| age(&a.metadata).cmp(&age(&b.metadata)));
    for route in routes {
        let spec = &route.spec;
        let of = (TLS_ROUTE, &route.metadata, &spec.parent_refs[..], &spec.hostnames[..], &spec.rules[..]);
        let Some(Attached { object, source, found, backends }) = attach_route(of, to, refs, resolver, draft, report)
        else {
            continue;
        };
        let shown = |host: &str| if host.is_empty() { "any server name".to_string() } else { host.to_string() };
        // Without a backend to relay to, the names' connections are closed after their ClientHello:
        // on a port of its own they are not served; on ramjet's HTTPS port they are passed to a
        // backend that takes no connection, so that they are not terminated as HTTPS instead.
        if backends.iter().all(|b| b.weight == 0) {
            let closed = error_backend(resolver);
            for (_, host) in found.into_iter().filter(|(l, _)| !l.own_tls_port) {
                if !draft.builder.add_passthrough(&host, TlsTarget::passthrough(closed.clone(), &source)) {
                    draft.warn(&object, format!("{} is already passed through by an older route", shown(&host)));
                }
            }
            continue;
        }
        for (listener, host) in found {
            let terminate = listener.certificate.as_ref().map(|cert| {
                draft.certificates.push(cert.clone());
                cert.id
            });
            let target = TlsTarget { terminate, route: PortRoute::new(backends.clone(), &source) };
            if !listener.own_tls_port {
                // Beside HTTPS, on ramjet's HTTPS port.
                if !draft.builder.add_passthrough(&host, target) {
                    let message =
                        format!("{} is already passed through by an older route; not by this one", shown(&host));
                    draft.warn(&object, message);
                }
                continue;
            }
            let port = listener.listener.port as u16;
            if let Err(held) = draft.builder.add_tls_port_name(port, &host, target) {
                let message =
                    format!("{} on port {port} is held by the older route {held}; not by this one", shown(&host));
                draft.warn(&object, message);
            }
        }
    }
}

/// A Layer-4 route attached to our listeners: its object, its `namespace/name`, the listeners
/// (and names) it has, and the weighted backends of its rule.
struct Attached<'l, 's> {
    object: ObjectRef,
    source: String,
    found: Vec<(&'l ServedListener<'s>, String)>,
    backends: Vec<WeightedBackend>,
}

/// A Layer-4 route of `kind` (its metadata, parentRefs, hostnames and rules) attached to our
/// listeners, its backends resolved and its status reported (in `report`'s list of its kind);
/// `None` when no parent of ours attaches it.
#[allow(clippy::type_complexity)]
fn attach_route<'l, 's>(
    (kind, metadata, parent_refs, hostnames, rules): (
        &'static str,
        &ObjectMeta,
        &[ParentReference],
        &[String],
        &[TcpRouteRule],
    ),
    to: Parents<'l, 's>,
    refs: &Refs<'_>,
    resolver: &mut Resolver<'s, '_>,
    draft: &mut Draft,
    report: &mut Report,
) -> Option<Attached<'l, 's>> {
    let namespace = namespace_of(&metadata.namespace);
    let name = metadata.name.as_deref().unwrap_or("");
    let object = ObjectRef::new(kind, Some(namespace), name);
    let (mut parents, found) = to.attach_all((kind, namespace, hostnames), parent_refs, &object, report, draft);
    if parents.is_empty() {
        return None;
    }
    let from = Referrer { kind, namespace, backend_certificate: None };
    let (backends, resolved) = l4_backends(rules, from, refs, resolver, draft, &object);
    for parent in &mut parents {
        parent.conditions.push(resolved.clone());
    }
    let reports = match kind {
        TCP_ROUTE => &mut report.tcp_routes,
        UDP_ROUTE => &mut report.udp_routes,
        _ => &mut report.tls_routes,
    };
    let generation = metadata.generation;
    reports.push(RouteReport { namespace: namespace.to_string(), name: name.to_string(), generation, parents });
    Some(Attached { object, source: format!("{namespace}/{name}"), found, backends })
}

/// The weighted backends of a Layer-4 route's rule (TCPRoute, UDPRoute, TLSRoute: one rule at
/// most), each reference that resolves, and the route's `ResolvedRefs`: the first problem, each
/// one warned.
fn l4_backends(
    rules: &[TcpRouteRule],
    from: Referrer<'_>,
    refs: &Refs<'_>,
    resolver: &mut Resolver<'_, '_>,
    draft: &mut Draft,
    object: &ObjectRef,
) -> (Vec<WeightedBackend>, StatusCondition) {
    let mut resolved = StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", "");
    let mut backends = Vec::new();
    let references: Vec<&HttpBackendRef> = rules.iter().take(1).flat_map(|r| &r.backend_refs).collect();
    if references.is_empty() {
        resolved = StatusCondition::new("ResolvedRefs", false, "BackendNotFound", "the route has no backendRefs");
    }
    for (i, reference) in references.into_iter().enumerate() {
        match backend(reference, from, refs, resolver) {
            Ok(target) => backends.push(WeightedBackend::new(target, reference.weight.unwrap_or(1).max(0) as u32)),
            Err(problem) => {
                draft.warn(
                    object,
                    format!("spec.rules[0].backendRefs[{i}]: {}; it gets no connections", problem.message),
                );
                if resolved.status {
                    resolved = problem.condition();
                }
            }
        }
    }
    (backends, resolved)
}
