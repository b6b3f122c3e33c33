//! GRPCRoutes, compiled as the HTTPRoutes they mean. A gRPC call is an HTTP/2 POST to
//! `/<service>/<method>`, so each method match becomes a path match, and the rest of a GRPCRoute
//! (parentRefs, hostnames, header matches, the header and mirror filters, weighted backendRefs) is
//! an HTTPRoute's already:
//!
//! | method match | path match |
//! |---|---|
//! | `Exact`, service and method | `Exact /<service>/<method>` |
//! | `Exact`, service only | `PathPrefix /<service>` (every method of the service) |
//! | `Exact`, method only | `RegularExpression /[^/]+/<method>` (the method, escaped, of any service) |
//! | `RegularExpression` | `RegularExpression /(<service>)/(<method>)`, `[^/]+` for the part not given |
//! | none | `PathPrefix /` |
//!
//! What differs is kept apart: the backends speak HTTP/2 (gRPC: errors ramjet makes are answered the
//! gRPC way), only the gRPC filters are accepted, and the order of precedence is the GRPCRoute
//! spec's (the most characters of a matching service, then of a matching method, then the most
//! header matches; then the oldest route and rule order), which [`rank`] gives.

use crate::gateway_api::{
    GrpcMethodMatch, GrpcRoute, HttpRoute, HttpRouteMatch, HttpRouteRule, HttpRouteSpec, PathMatch,
};

/// The filters a GRPCRoute rule may have and ramjet applies. `RequestMirror` is refused: a copy goes
/// out in HTTP/1.1 and only of a request buffered whole, and a gRPC call is neither.
const FILTERS: [&str; 2] = ["RequestHeaderModifier", "ResponseHeaderModifier"];

/// The HTTPRoute a GRPCRoute means, and the problems that keep matches out (as `(rule, match,
/// message)`): a match without service and method, a service or method that is not a valid name.
/// A filter ramjet does not apply to gRPC keeps its rule, renamed so the HTTPRoute compiler
/// reports it as unsupported (the rule answers with an error, the route's status says why).
pub(super) fn as_http_route(route: &GrpcRoute) -> (HttpRoute, Vec<(usize, usize, String)>) {
    let mut problems = Vec::new();
    let rules = route
        .spec
        .rules
        .iter()
        .enumerate()
        .map(|(r, rule)| {
            let mut matches = Vec::new();
            for (m, found) in rule.matches.iter().enumerate() {
                // A refused match matches nothing (and keeps its place: the ranks of the others
                // are read by index).
                let path = path_match(found.method.as_ref()).unwrap_or_else(|e| {
                    problems.push((r, m, e));
                    nothing()
                });
                matches.push(HttpRouteMatch {
                    path: Some(path),
                    headers: found.headers.clone(),
                    ..HttpRouteMatch::default()
                });
            }
            let mut filters = rule.filters.clone();
            for filter in &mut filters {
                if !FILTERS.contains(&filter.type_.as_str()) {
                    filter.type_ = format!("{} (on a GRPCRoute)", filter.type_);
                }
            }
            HttpRouteRule {
                name: rule.name.clone(),
                matches,
                filters,
                backend_refs: rule.backend_refs.clone(),
                timeouts: None,
            }
        })
        .collect();
    let spec =
        HttpRouteSpec { parent_refs: route.spec.parent_refs.clone(), hostnames: route.spec.hostnames.clone(), rules };
    (HttpRoute { metadata: route.metadata.clone(), spec, status: None }, problems)
}

/// A GRPCRoute match's place in its spec's precedence, for the path match it became: the
/// characters of the service matched, then of the method (more first). `None` for HTTPRoutes.
pub(super) fn rank(method: Option<&GrpcMethodMatch>) -> (usize, usize) {
    let given = |part: Option<&String>| part.map_or(0, |p| p.len());
    method.map_or((0, 0), |m| (given(m.service.as_ref()), given(m.method.as_ref())))
}

/// A path match that no request path has (a gRPC path starts with `/`).
fn nothing() -> PathMatch {
    PathMatch { type_: Some("RegularExpression".into()), value: Some("[^/].*".into()) }
}

fn path_match(method: Option<&GrpcMethodMatch>) -> Result<PathMatch, String> {
    let Some(method) = method else {
        return Ok(PathMatch { type_: Some("PathPrefix".into()), value: Some("/".into()) });
    };
    let (service, name) = (method.service.as_deref(), method.method.as_deref());
    if service.is_none() && name.is_none() {
        return Err("a method match needs a service, a method or both".into());
    }
    let path = |type_: &str, value: String| PathMatch { type_: Some(type_.into()), value: Some(value) };
    match method.type_.as_deref().unwrap_or("Exact") {
        "Exact" => {
            for part in [service, name].into_iter().flatten() {
                if part.is_empty() || part.bytes().any(|b| b == b'/' || !b.is_ascii_graphic()) {
                    return Err(format!("`{part}` is not a gRPC service or method name"));
                }
            }
            Ok(match (service, name) {
                (Some(s), Some(m)) => path("Exact", format!("/{s}/{m}")),
                (Some(s), None) => path("PathPrefix", format!("/{s}")),
                (None, Some(m)) => path("RegularExpression", format!("/[^/]+/{}", escape(m))),
                (None, None) => unreachable!("refused above"),
            })
        }
        "RegularExpression" => {
            let part = |p: Option<&str>| p.map_or_else(|| "[^/]+".to_string(), |p| format!("(?:{p})"));
            Ok(path("RegularExpression", format!("/{}/{}", part(service), part(name))))
        }
        other => Err(format!("method match type {other} is not supported (Exact, RegularExpression)")),
    }
}

/// `text` as a regular expression that matches exactly it.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(type_: Option<&str>, service: Option<&str>, name: Option<&str>) -> Option<GrpcMethodMatch> {
        Some(GrpcMethodMatch {
            type_: type_.map(String::from),
            service: service.map(String::from),
            method: name.map(String::from),
        })
    }

    #[test]
    fn method_matches_become_path_matches() {
        let path = |m: Option<GrpcMethodMatch>| {
            let p = path_match(m.as_ref()).unwrap();
            format!("{} {}", p.type_.unwrap(), p.value.unwrap())
        };
        assert_eq!(path(None), "PathPrefix /");
        assert_eq!(path(method(None, Some("hello.Greeter"), Some("SayHello"))), "Exact /hello.Greeter/SayHello");
        assert_eq!(path(method(None, Some("hello.Greeter"), None)), "PathPrefix /hello.Greeter");
        assert_eq!(path(method(None, None, Some("Say.Hello"))), r"RegularExpression /[^/]+/Say\.Hello");
        assert_eq!(
            path(method(Some("RegularExpression"), Some(r"hello\..*"), None)),
            r"RegularExpression /(?:hello\..*)/[^/]+"
        );
        assert!(path_match(method(None, None, None).as_ref()).is_err());
        assert!(path_match(method(None, Some("a/b"), None).as_ref()).is_err());
        assert!(path_match(method(Some("Prefix"), Some("a"), None).as_ref()).is_err());
    }

    #[test]
    fn the_spec_ranks_longer_services_then_longer_methods_first() {
        let longer_service = rank(method(None, Some("a.LongService"), None).as_ref());
        let both = rank(method(None, Some("a.B"), Some("Method")).as_ref());
        let method_only = rank(method(None, None, Some("AVeryLongMethodName")).as_ref());
        assert!(longer_service > both && both > method_only);
    }
}
