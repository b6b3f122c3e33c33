//! ingress-nginx's per-location annotations on paths: `use-regex`, `rewrite-target`,
//! `x-forwarded-prefix`, `app-root`, `proxy-body-size` and the proxy timeouts, and how a host with regex paths turns *every* path of that
//! host into a regex location, as ingress-nginx's template does (`enforceRegexModifier`,
//! `updateServerLocations` and `buildLocation` in its controller).

use std::collections::HashSet;
use std::sync::Arc;

use ramjet_shared::{
    parse_ranges, Affinity, ClientLimits, Cors, Filter, HashBy, NextUpstream, PathRewrite, ProxyRewrites, Rate,
    RouteLimits, AFFINITY_COOKIE, CORS_HEADERS, CORS_MAX_AGE, CORS_METHODS,
};

use crate::canary::Annotations;
use crate::compile::annotations::values::{
    app_root, connection_header, cookie_rewrite, forwarded_prefix, parse_bool, parse_count, parse_seconds, parse_size,
    redirect_rewrite, rewrite_target, upstream_vhost,
};

/// The Ingress's path annotations, read once.
#[derive(Debug, Clone, Default)]
pub(super) struct PathAnnotations {
    use_regex: bool,
    /// `rewrite-target`, when given and not empty.
    rewrite_target: Option<String>,
    x_forwarded_prefix: Option<String>,
    pub app_root: Option<String>,
    /// `upstream-vhost`: the Host the backend gets.
    upstream_vhost: Option<String>,
    /// `connection-proxy-header`: the `Connection` an HTTP/1.1 backend gets (`close`, `keep-alive`).
    connection: Option<&'static str>,
    /// `force-ssl-redirect`: plain HTTP for the Ingress's hosts is redirected to HTTPS, TLS or not.
    pub force_ssl_redirect: bool,
    /// `proxy-body-size` and the proxy timeouts.
    pub limits: RouteLimits,
}

/// ingress-nginx's burst multiplier when `limit-burst-multiplier` is not given.
const BURST_MULTIPLIER: u64 = 5;

/// The Ingress's per-client limits (`limit-rps`, `limit-rpm`, `limit-connections`, with
/// `limit-burst-multiplier` and `limit-allowlist` / `limit-whitelist`), counted in `zone`; `None`
/// when it sets none. As ingress-nginx builds them: each rate's burst is the rate times the
/// multiplier (5 by default), refused clients get 503, and allow-listed addresses are not limited.
pub(super) fn client_limits(
    annotations: &Annotations<'_>,
    zone: u64,
    problems: &mut Vec<String>,
) -> Option<Arc<ClientLimits>> {
    let mut count = |name| {
        let (key, value) = annotations.get(name).filter(|(_, v)| !v.trim().is_empty())?;
        parse_count(value).map_err(|e| problems.push(format!("{key}: {e}"))).ok().filter(|n| *n > 0)
    };
    let (rps, rpm, concurrent) = (count("limit-rps"), count("limit-rpm"), count("limit-connections"));
    let multiplier = count("limit-burst-multiplier").unwrap_or(BURST_MULTIPLIER);
    let exempt = match annotations.get("limit-allowlist").or_else(|| annotations.get("limit-whitelist")) {
        Some((key, value)) if !value.trim().is_empty() => match parse_ranges(value) {
            Ok(blocks) => blocks.into(),
            Err(e) => {
                problems.push(format!("{key}: {e}"));
                return None;
            }
        },
        _ => Box::default(),
    };
    if rps.is_none() && rpm.is_none() && concurrent.is_none() {
        return None;
    }
    let rate = |requests: u64, per_minute| Rate { requests, per_minute, burst: requests * multiplier };
    Some(Arc::new(ClientLimits {
        zone,
        per_second: rps.map(|n| rate(n, false)),
        per_minute: rpm.map(|n| rate(n, true)),
        concurrent: concurrent.map(|n| n as u32),
        exempt,
    }))
}

/// ingress-nginx's `proxy-next-upstream` with `-tries` (3 by default) and `-timeout` (seconds, 0
/// for none); any of the three asks for nginx's rules, with the list `error timeout` when only the
/// others are given. Without any, ramjet's default stays (a refused connection moves on once).
pub(super) fn next_upstream(annotations: &Annotations<'_>, problems: &mut Vec<String>) -> Option<NextUpstream> {
    let given = |name| annotations.given(name);
    let (list, tries, within) =
        (given("proxy-next-upstream"), given("proxy-next-upstream-tries"), given("proxy-next-upstream-timeout"));
    if list.is_none() && tries.is_none() && within.is_none() {
        return None;
    }
    let mut failed = false;
    let tries = match tries {
        None => NextUpstream::DEFAULT.tries,
        Some((key, v)) => parse_count(v).map(|n| n.min(u64::from(u32::MAX)) as u32).unwrap_or_else(|e| {
            problems.push(format!("{key}: {e}"));
            failed = true;
            0
        }),
    };
    let within = match within {
        None => None,
        Some((key, v)) => match parse_seconds(v) {
            Ok(d) if d.is_zero() => None,
            Ok(d) => Some(d),
            Err(e) => {
                problems.push(format!("{key}: {e}"));
                failed = true;
                None
            }
        },
    };
    let (key, list) = list.unwrap_or_else(|| ("proxy-next-upstream".to_string(), "error timeout"));
    match NextUpstream::parse(list, tries, within) {
        Ok(next) if !failed => Some(next),
        Ok(_) => None,
        Err(e) => {
            problems.push(format!("{key}: {e}"));
            None
        }
    }
}

/// ingress-nginx's `upstream-hash-by`: the key that picks each request's endpoint. A variable
/// ramjet does not have is empty, as in ingress-nginx's Lua, and the Ingress gets a warning.
pub(super) fn hash_by(
    annotations: &Annotations<'_>,
    problems: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Option<HashBy> {
    let (key, value) = annotations.get("upstream-hash-by").filter(|(_, v)| !v.trim().is_empty())?;
    match HashBy::parse(value.trim()) {
        Ok(mut by) => {
            if annotations.given("upstream-hash-by-subset").is_some_and(|(_, v)| parse_bool(v) == Ok(true)) {
                let size = match annotations.given("upstream-hash-by-subset-size") {
                    None => 3,
                    Some((key, v)) => match v.trim().parse::<u8>() {
                        Ok(n) if n > 0 => n,
                        _ => {
                            warnings.push(format!("{key}: `{v}` is not a whole number from 1 to 255; 3 is used"));
                            3
                        }
                    },
                };
                by = by.with_subset(size);
            }
            let unknown = by.unknown();
            if !unknown.is_empty() {
                warnings.push(format!(
                    "{key}: ramjet has no ${}; it is empty in the key, as an unset variable is in ingress-nginx",
                    unknown.join(", $")
                ));
            }
            Some(by)
        }
        Err(e) => {
            problems.push(format!("{key}: {e}"));
            None
        }
    }
}

/// Sticky sessions (`affinity: cookie` and the `session-cookie-*` annotations), with the cookie's
/// path still to be set per route when `session-cookie-path` is not given (see
/// [`Affinity::path`]); `None` without `affinity`. `affinity-mode` may be `balanced` (the
/// default) or `persistent`: both keep a session on its endpoint while that endpoint exists.
pub(super) fn affinity(annotations: &Annotations<'_>, problems: &mut Vec<String>) -> Option<Affinity> {
    let given = |name| annotations.given(name);
    let (key, value) = given("affinity")?;
    if value.trim() != "cookie" {
        problems.push(format!("{key}: `{}` is not an affinity ramjet knows (only \"cookie\")", value.trim()));
        return None;
    }
    let mut bad = |key: &str, why: String| {
        problems.push(format!("{key}: {why}"));
    };
    if let Some((key, mode)) = given("affinity-mode") {
        if !matches!(mode.trim(), "balanced" | "persistent") {
            bad(&key, format!("`{}` is neither balanced nor persistent", mode.trim()));
        }
    }
    let cookie_text = |key: &str, v: &str, bad: &mut dyn FnMut(&str, String)| -> Option<Arc<str>> {
        let v = v.trim();
        if v.bytes().all(|b| b.is_ascii_graphic() && !matches!(b, b';' | b',' | b'=' | b'"' | b'\\')) {
            Some(v.into())
        } else {
            bad(key, format!("`{v}` cannot be put in a cookie"));
            None
        }
    };
    let cookie = match given("session-cookie-name") {
        Some((key, v)) => cookie_text(&key, v, &mut bad)?,
        None => AFFINITY_COOKIE.into(),
    };
    let path = match given("session-cookie-path") {
        Some((key, v)) if v.trim().starts_with('/') => cookie_text(&key, v, &mut bad)?,
        Some((key, v)) => {
            bad(&key, format!("`{}` is not a path", v.trim()));
            return None;
        }
        None => "".into(),
    };
    let domain = match given("session-cookie-domain") {
        Some((key, v)) => Some(cookie_text(&key, v, &mut bad)?),
        None => None,
    };
    let mut seconds = |name| {
        let (key, v) = given(name)?;
        v.trim().parse::<u64>().map_err(|_| bad(&key, format!("`{}` is not a number of seconds", v.trim()))).ok()
    };
    let max_age = seconds("session-cookie-max-age");
    let expires = seconds("session-cookie-expires");
    let secure = match given("session-cookie-secure") {
        Some((key, v)) => parse_bool(v).map_err(|e| bad(&key, e)).unwrap_or(false),
        None => false,
    };
    let same_site = match given("session-cookie-samesite") {
        Some((key, v)) => match v.trim().to_ascii_lowercase().as_str() {
            "none" => Some("None".into()),
            "lax" => Some("Lax".into()),
            "strict" => Some("Strict".into()),
            other => {
                bad(&key, format!("`{other}` is not None, Lax or Strict"));
                None
            }
        },
        None => None,
    };
    Some(Affinity { cookie, path, domain, max_age, expires, secure, same_site })
}

/// A `cors-allow-origin` entry ingress-nginx accepts: `*`, `null`, or
/// `<scheme>://[*.]<host chars>[:<port>]`.
fn valid_origin(origin: &str) -> bool {
    if origin == "*" || origin == "null" {
        return true;
    }
    let Some((scheme, rest)) = origin.split_once("://") else { return false };
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_lowercase()) {
        return false;
    }
    let rest = rest.strip_prefix("*.").unwrap_or(rest);
    let (host, port) = match rest.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (rest, None),
    };
    host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A list of tokens (letters, digits and `extra`) separated by commas and spaces.
fn token_list(value: &str, extra: &[u8]) -> bool {
    !value.trim().is_empty()
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b',' || b == b' ' || extra.contains(&b))
}

/// ingress-nginx's CORS annotations, with its fallbacks: an invalid origin is skipped, invalid
/// methods, headers or max-age fall back to the defaults, invalid exposed headers to none — each
/// with a warning, never silently.
fn read_cors(annotations: &Annotations<'_>, warnings: &mut Vec<String>) -> Option<Cors> {
    let (key, enable) = annotations.get("enable-cors")?;
    match parse_bool(enable) {
        Ok(true) => {}
        Ok(false) => return None,
        Err(e) => {
            warnings.push(format!("{key}: {e}; CORS stays off, as in ingress-nginx"));
            return None;
        }
    }
    let mut origins: Vec<Box<str>> = Vec::new();
    // A blank list is no list: any origin, as in ingress-nginx (whose annotation reader refuses an
    // empty value).
    match annotations.given("cors-allow-origin") {
        None => origins.push("*".into()),
        Some((key, value)) => {
            for origin in value.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                if origin == "*" {
                    origins = vec!["*".into()];
                    break;
                }
                if valid_origin(origin) {
                    origins.push(origin.into());
                } else {
                    warnings.push(format!("{key}: `{origin}` is not an origin (scheme://host[:port]); it is skipped"));
                }
            }
        }
    }
    let mut text = |name: &str, valid: &dyn Fn(&str) -> bool, default: &str| match annotations.get(name) {
        Some((_, v)) if valid(v) => v.trim().to_string(),
        Some((key, v)) => {
            warnings.push(format!("{key}: `{v}` is not valid; `{default}` is used, as in ingress-nginx"));
            default.to_string()
        }
        None => default.to_string(),
    };
    let methods = text("cors-allow-methods", &|v| token_list(v, b""), CORS_METHODS);
    let headers = text("cors-allow-headers", &|v| token_list(v, b"-_"), CORS_HEADERS);
    let expose = text("cors-expose-headers", &|v| token_list(v, b"-_*"), "");
    let max_age = text("cors-max-age", &|v| v.trim().parse::<u32>().is_ok(), CORS_MAX_AGE);
    let credentials = match annotations.get("cors-allow-credentials") {
        None => true,
        Some((key, v)) => parse_bool(v).unwrap_or_else(|e| {
            warnings.push(format!("{key}: {e}; `true` is used, as in ingress-nginx"));
            true
        }),
    };
    Some(Cors {
        origins: origins.into_boxed_slice(),
        credentials,
        methods: methods.into(),
        headers: headers.into(),
        expose: expose.into(),
        max_age: max_age.into(),
    })
}

/// ingress-nginx's `proxy-redirect-from`/`-to` and `proxy-cookie-domain`/`-path`: nginx's
/// `proxy_redirect`, `proxy_cookie_domain` and `proxy_cookie_path`, `off` (the default) for none.
/// `proxy-redirect-from: default` is nginx's rewrite of the upstream's own URL, which ramjet's
/// backends, addressed by endpoint, never send: nothing to rewrite.
fn proxy_rewrites(annotations: &Annotations<'_>, problems: &mut Vec<String>) -> Option<ProxyRewrites> {
    let given = |name| annotations.given(name);
    let mut rewrites = ProxyRewrites::default();
    let from =
        given("proxy-redirect-from").map(|(k, v)| (k, v.trim())).filter(|(_, v)| !matches!(*v, "off" | "default"));
    let to = given("proxy-redirect-to").map(|(k, v)| (k, v.trim())).filter(|(_, v)| *v != "off");
    if let (Some((from_key, from)), Some((to_key, to))) = (from, to) {
        match (redirect_rewrite(from), redirect_rewrite(to)) {
            (Ok(()), Ok(())) => rewrites.redirect = Some((from.into(), to.into())),
            (Err(e), _) => problems.push(format!("{from_key}: {e}")),
            (_, Err(e)) => problems.push(format!("{to_key}: {e}")),
        }
    }
    for (name, slot) in
        [("proxy-cookie-domain", &mut rewrites.cookie_domain), ("proxy-cookie-path", &mut rewrites.cookie_path)]
    {
        if let Some((key, value)) = given(name) {
            match cookie_rewrite(value) {
                Ok(pair) => *slot = pair,
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
    }
    (rewrites != ProxyRewrites::default()).then_some(rewrites)
}

impl PathAnnotations {
    pub fn read(annotations: &Annotations<'_>, problems: &mut Vec<String>, warnings: &mut Vec<String>) -> Self {
        let mut read = PathAnnotations::default();
        read.limits.cors = read_cors(annotations, warnings).map(Box::new);
        if let Some((key, value)) = annotations.get("use-regex") {
            match parse_bool(value) {
                Ok(b) => read.use_regex = b,
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        let given = |name| annotations.given(name);
        if let Some((key, value)) = given("rewrite-target") {
            match rewrite_target(value) {
                Ok(()) => read.rewrite_target = Some(value.trim().to_string()),
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        if let Some((key, value)) = given("x-forwarded-prefix") {
            match forwarded_prefix(value) {
                Ok(()) => read.x_forwarded_prefix = Some(value.trim().to_string()),
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        // The allow-list's current name wins over its old one, as in ingress-nginx's parser.
        let allow = given("allowlist-source-range").or_else(|| given("whitelist-source-range"));
        for (found, deny) in [(allow, false), (given("denylist-source-range"), true)] {
            let Some((key, value)) = found else { continue };
            match parse_ranges(value) {
                Ok(blocks) if deny => read.limits.sources.deny = blocks.into(),
                Ok(blocks) => read.limits.sources.allow = blocks.into(),
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        if let Some((key, value)) = given("proxy-body-size") {
            match parse_size(value) {
                Ok(max) => read.limits.max_body = max,
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        for (name, slot) in [
            ("proxy-connect-timeout", &mut read.limits.connect_timeout),
            ("proxy-send-timeout", &mut read.limits.send_timeout),
            ("proxy-read-timeout", &mut read.limits.read_timeout),
        ] {
            if let Some((key, value)) = given(name) {
                match parse_seconds(value) {
                    Ok(d) => *slot = Some(d),
                    Err(e) => problems.push(format!("{key}: {e}")),
                }
            }
        }
        read.limits.next_upstream = next_upstream(annotations, problems);
        if let Some((key, value)) = given("load-balance") {
            match value.trim() {
                "round_robin" => {}
                "ewma" => read.limits.ewma = true,
                other => problems.push(format!("{key}: `{other}` is neither round_robin nor ewma")),
            }
        }
        if let Some((key, value)) = given("upstream-vhost") {
            match upstream_vhost(value) {
                Ok(()) => read.upstream_vhost = Some(value.trim().to_string()),
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        if let Some((key, value)) = given("connection-proxy-header") {
            match connection_header(value) {
                Ok(()) => read.connection = Some(if value.trim() == "close" { "close" } else { "keep-alive" }),
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        if let Some((key, value)) = given("force-ssl-redirect") {
            match parse_bool(value) {
                Ok(b) => read.force_ssl_redirect = b,
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        read.limits.proxy_rewrites = proxy_rewrites(annotations, problems).map(Box::new);
        if let Some((key, value)) = given("enable-rewrite-log") {
            match parse_bool(value) {
                Ok(on) => read.limits.rewrite_log = on,
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        if let Some((key, value)) = given("satisfy") {
            match value.trim() {
                "all" => {}
                "any" => read.limits.satisfy_any = true,
                other => problems.push(format!("{key}: `{other}` is neither all nor any")),
            }
        }
        if let Some((key, value)) = given("enable-access-log") {
            match parse_bool(value) {
                Ok(on) => read.limits.unlogged = !on,
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        if let Some((key, value)) = given("app-root") {
            match app_root(value) {
                Ok(()) => read.app_root = Some(value.trim().to_string()),
                Err(e) => problems.push(format!("{key}: {e}")),
            }
        }
        read
    }

    /// Whether `path` needs a rewrite: a target that is not the path itself (ingress-nginx's
    /// `needsRewrite`).
    fn rewrites(&self, path: &str) -> Option<&str> {
        self.rewrite_target.as_deref().filter(|t| *t != path)
    }

    /// Whether `path` makes its host a regex host: `use-regex`, or a rewrite.
    pub fn regex(&self, path: &str) -> bool {
        self.use_regex || self.rewrites(path).is_some()
    }

    /// The filters for `path`: the rewrite (`rewrite "(?i)<path>" <target> break;`) and, with it
    /// only, `X-Forwarded-Prefix` (ingress-nginx sets the header inside the rewrite's branch).
    /// `upstream-vhost` (nginx's `proxy_set_header Host`) and `connection-proxy-header`
    /// (`proxy_set_header Connection`) apply to every path.
    pub fn filters(&self, path: &str) -> Result<Vec<Filter>, String> {
        let mut filters = Vec::new();
        if let Some(target) = self.rewrites(path) {
            filters.push(Filter::PathRewrite(PathRewrite::regex(path, target)?));
            if let Some(prefix) = &self.x_forwarded_prefix {
                let value = prefix.as_str().into();
                filters.push(Filter::SetRequestHeader { name: "x-forwarded-prefix".into(), value });
            }
        }
        if let Some(vhost) = &self.upstream_vhost {
            filters.push(Filter::SetRequestHeader { name: "host".into(), value: vhost.as_str().into() });
        }
        if let Some(connection) = self.connection {
            filters.push(Filter::SetRequestHeader { name: "connection".into(), value: connection.into() });
        }
        Ok(filters)
    }
}

/// How one Ingress path becomes locations on a regex host.
pub(super) struct RegexSource<'a> {
    pub path: &'a str,
    /// The path's Ingress asked for regex paths (or rewrites it).
    pub regex: bool,
    /// `pathType: Prefix` (not Exact, not ImplementationSpecific).
    pub prefix: bool,
}

/// The regex location (`~* "^<pattern>"`) of one path on a regex host, in ingress-nginx's order
/// (paths sorted, then each `pathType: Prefix` path of an Ingress without regex expanded in place
/// into `<path>/` followed by `<path>`, `updateServerLocations`). Adjacent, with one backend,
/// those two match exactly what `<path>` alone does, so the path stays as it is — except when the
/// host has an Exact path equal to it: then only `<path>/` is written. That one is ordered as
/// `<path>/` here (one character longer than ingress-nginx orders it), the one difference.
pub(super) fn regex_location(source: &RegexSource<'_>, exact_paths: &HashSet<String>) -> String {
    let path = source.path;
    if path == "/" || source.regex || !source.prefix || !exact_paths.contains(path) || path.ends_with('/') {
        return path.to_string();
    }
    format!("{path}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_paths_of_plain_ingresses_keep_their_path_unless_an_exact_one_has_it() {
        let none = HashSet::new();
        let src = |path, regex, prefix| RegexSource { path, regex, prefix };
        assert_eq!(regex_location(&src("/foo", false, true), &none), "/foo");
        assert_eq!(regex_location(&src("/foo/", false, true), &none), "/foo/");
        assert_eq!(regex_location(&src("/", false, true), &none), "/");
        let exact = HashSet::from(["/foo".to_string()]);
        assert_eq!(regex_location(&src("/foo", false, true), &exact), "/foo/");
        assert_eq!(regex_location(&src("/foo", true, true), &exact), "/foo");
        assert_eq!(regex_location(&src("/foo", false, false), &exact), "/foo");
    }
}
