//! A route's filters on the head that goes upstream: the path rewrite and request fields
//! (ingress-nginx's `rewrite-target` and `x-forwarded-prefix`). Only routes with filters come
//! here; the head is edited in place in the worker's pooled buffer.

use ramjet_shared::{Filter, PathRewrite, RewriteScratch, RoutePolicy};

/// Applies `policy`'s route filters to the upstream head in `out` (request line first, ending in
/// the blank line). `target` is the request target the route was chosen by (path and query).
pub(crate) fn apply(out: &mut Vec<u8>, policy: &RoutePolicy, target: &[u8], scratch: &mut RewriteScratch) {
    for filter in policy.filters.iter() {
        match filter {
            Filter::PathRewrite(rewrite) => {
                let (path, query) = match target.iter().position(|&b| b == b'?') {
                    Some(i) => (&target[..i], &target[i + 1..]),
                    None => (target, &[][..]),
                };
                let rewritten = rewrite.apply(path, scratch);
                if policy.limits.rewrite_log {
                    log_rewrite(rewrite, path, query, rewritten.then_some(&scratch.path[..]));
                }
                if rewritten {
                    // nginx's rewrite appends the request's arguments to the new URI.
                    if !query.is_empty() {
                        scratch.path.push(b'?');
                        scratch.path.extend_from_slice(query);
                    }
                    replace_target(out, &scratch.path);
                }
            }
            // `connection-proxy-header` does not undo an upgrade's `connection: upgrade` (nginx's
            // would, and break the WebSocket).
            Filter::SetRequestHeader { name, .. } if &**name == "connection" && has_field(out, b"connection") => {}
            Filter::SetRequestHeader { name, value } => set_field(out, name.as_bytes(), value.as_bytes()),
            // Answered before proxying, or a rule's filter (applied by `crate::policy::edit`).
            Filter::Mirror(_)
            | Filter::AppRoot(_)
            | Filter::HostRedirect(_)
            | Filter::RequestHeaders(_)
            | Filter::ResponseHeaders(_)
            | Filter::Rewrite(_)
            | Filter::Redirect(_) => {}
        }
    }
}

/// nginx's `rewrite_log on` lines for one request: whether the route's regex matched its path,
/// and what it was rewritten to (ingress-nginx's `enable-rewrite-log`; only routes that ask).
#[cold]
fn log_rewrite(rewrite: &PathRewrite, path: &[u8], query: &[u8], rewritten: Option<&[u8]>) {
    let PathRewrite::Regex(regex) = rewrite else { return };
    let (pattern, path) = (regex.pattern(), String::from_utf8_lossy(path));
    match rewritten {
        Some(new) => tracing::info!(
            "\"(?i){pattern}\" matches \"{path}\", rewritten data: \"{}\", args: \"{}\"",
            String::from_utf8_lossy(new),
            String::from_utf8_lossy(query)
        ),
        None => tracing::info!("\"(?i){pattern}\" does not match \"{path}\""),
    }
}

/// Whether the filters ask the backend to close the connection after its answer
/// (`connection-proxy-header: close`).
pub(crate) fn closes_upstream(policy: Option<&RoutePolicy>) -> bool {
    policy.is_some_and(|p| {
        p.filters.iter().any(
            |f| matches!(f, Filter::SetRequestHeader { name, value } if &**name == "connection" && &**value == "close"),
        )
    })
}

/// Whether the filters write the upstream `Host` (`upstream-vhost`).
pub(crate) fn sets_host(policy: &RoutePolicy) -> bool {
    policy.filters.iter().any(|f| matches!(f, Filter::SetRequestHeader { name, .. } if &**name == "host"))
}

/// Whether the head in `out` has a field named `name` (lower case, as ramjet writes its own).
fn has_field(out: &[u8], name: &[u8]) -> bool {
    out.split(|&b| b == b'\n')
        .skip(1)
        .any(|line| line.len() > name.len() && line[name.len()] == b':' && line.starts_with(name))
}

/// Replaces the request target in the request line at the start of `out`.
fn replace_target(out: &mut Vec<u8>, target: &[u8]) {
    let Some(start) = out.iter().position(|&b| b == b' ').map(|i| i + 1) else { return };
    let Some(len) = out[start..].iter().position(|&b| b == b' ') else { return };
    out.splice(start..start + len, target.iter().copied());
}

/// Removes every field named `name` from the head in `out` and adds `name: value` before the
/// blank line, unless `value` is empty (nginx's `proxy_set_header` replaces what the client sent).
pub(crate) fn set_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let mut line_start = match out.iter().position(|&b| b == b'\n') {
        Some(i) => i + 1,
        None => return,
    };
    while line_start < out.len() {
        let Some(len) = out[line_start..].iter().position(|&b| b == b'\n') else { break };
        let line = &out[line_start..line_start + len + 1];
        if line == b"\r\n" {
            break;
        }
        let named =
            line.len() > name.len() && line[name.len()] == b':' && line[..name.len()].eq_ignore_ascii_case(name);
        if named {
            out.drain(line_start..line_start + len + 1);
        } else {
            line_start += len + 1;
        }
    }
    // An empty value passes no field at all, as nginx's `proxy_set_header` with "".
    if value.is_empty() {
        return;
    }
    // Before the blank line: the head grows in place (the pooled buffer has the room).
    let end = out.len().saturating_sub(2);
    out.truncate(end);
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use ramjet_shared::PathRewrite;

    fn policy(filters: Vec<Filter>) -> RoutePolicy {
        RoutePolicy::with_filters(vec![], filters)
    }

    #[test]
    fn cors_fields_replace_the_backends() {
        let cors = ramjet_shared::Cors {
            origins: Box::new(["*".into()]),
            credentials: false,
            methods: "GET".into(),
            headers: "X-A".into(),
            expose: "".into(),
            max_age: "5".into(),
        };
        let mut out =
            b"HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: https://backend\r\ncontent-length: 0\r\n\r\n".to_vec();
        // As the response edits set them (`crate::pipeline::respond`).
        for (name, value) in cors.fields(b"*") {
            set_field(&mut out, name.as_bytes(), value);
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\naccess-control-allow-origin: *\r\naccess-control-allow-methods: \
             GET\r\naccess-control-allow-headers: X-A\r\naccess-control-max-age: 5\r\n\r\n"
        );
    }

    #[test]
    fn the_rewrite_keeps_the_query_and_the_header_replaces_the_clients() {
        let p = policy(vec![
            Filter::PathRewrite(PathRewrite::regex("/something(/|$)(.*)", "/$2").unwrap()),
            Filter::SetRequestHeader { name: "x-forwarded-prefix".into(), value: "/something".into() },
        ]);
        let mut out =
            b"GET /something/new?a=1 HTTP/1.1\r\nhost: h\r\nX-Forwarded-Prefix: /evil\r\naccept: */*\r\n\r\n".to_vec();
        apply(&mut out, &p, b"/something/new?a=1", &mut RewriteScratch::default());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /new?a=1 HTTP/1.1\r\nhost: h\r\naccept: */*\r\nx-forwarded-prefix: /something\r\n\r\n"
        );
    }
}
