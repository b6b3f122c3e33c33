//! The values of annotations: each parser the compiler reads a value with, and each check the
//! annotation table ([`super`]) judges a value with — one function for both, so `ramjet
//! migration-report` and the compiler never disagree about a value.

use std::time::Duration;

use ramjet_shared::{BackendProtocol, PathRewrite};

/// An nginx size (`client_max_body_size`): bytes, or a number with `k`, `m` or `g` (any case).
/// `Ok(None)`: `0`, unlimited.
pub fn parse_size(value: &str) -> Result<Option<u64>, String> {
    let v = value.trim();
    let (digits, unit) = match v.as_bytes().last() {
        Some(b'k' | b'K') => (&v[..v.len() - 1], 1u64 << 10),
        Some(b'm' | b'M') => (&v[..v.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    let bad = || format!("`{v}` is not an nginx size (a number of bytes, or with k, m or g)");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(unit).ok_or_else(bad)?;
    Ok((bytes > 0).then_some(bytes))
}

/// A count in a `limit-*` annotation: a whole number, 0 meaning no limit.
pub fn parse_count(value: &str) -> Result<u64, String> {
    value.trim().parse::<u32>().map(u64::from).map_err(|_| format!("`{}` is not a whole number", value.trim()))
}

/// A proxy timeout: whole seconds, as ingress-nginx reads them (`"120"`).
pub fn parse_seconds(value: &str) -> Result<Duration, String> {
    match value.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(Duration::from_secs(n.into())),
        _ => Err(format!("`{}` is not a number of seconds (ingress-nginx timeouts are unitless)", value.trim())),
    }
}

/// Go's `strconv.ParseBool`, which ingress-nginx's boolean annotations go through.
pub fn parse_bool(value: &str) -> Result<bool, String> {
    match value.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!("`{other}` is not a boolean (true or false)")),
    }
}

/// ingress-nginx's `RegexPathWithCapture` (letters, digits, `-._~/:` and `$`), which its
/// `rewrite-target`, `app-root` and `x-forwarded-prefix` values must match.
fn path_with_capture(value: &str) -> bool {
    value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/' | b':' | b'$'))
}

/// An `app-root` value: an absolute path (ingress-nginx refuses URLs and relative paths).
pub fn app_root(value: &str) -> Result<(), String> {
    let v = value.trim();
    if !v.starts_with('/') || v.contains("://") || !path_with_capture(v) || v.contains('$') {
        return Err(format!("app-root `{v}` is not an absolute path (letters, digits and `-._~/:`)"));
    }
    Ok(())
}

/// An `upstream-vhost` value: a host name or address, with an optional port (no nginx variables).
pub fn upstream_vhost(value: &str) -> Result<(), String> {
    let v = value.trim();
    let (name, port) = match v.rsplit_once(':') {
        Some((n, p)) if !n.contains(':') || n.starts_with('[') => (n, Some(p)),
        _ => (v, None),
    };
    let name_ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'[' | b']' | b':'));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    if !(name_ok && port_ok) {
        return Err(format!("upstream-vhost `{v}` is not a host name with an optional port (no nginx variables)"));
    }
    Ok(())
}

/// An `x-forwarded-prefix` value: sent as it is (no nginx variables).
pub fn forwarded_prefix(value: &str) -> Result<(), String> {
    let v = value.trim();
    if !path_with_capture(v) || v.contains('$') {
        return Err(format!("x-forwarded-prefix `{v}` must be a path (letters, digits and `-._~/:`, no variables)"));
    }
    Ok(())
}

/// A `rewrite-target` value, checked against a placeholder path (the real paths are checked with
/// the Ingress).
pub fn rewrite_target(value: &str) -> Result<(), String> {
    match value.trim() {
        "" => Ok(()),
        target => PathRewrite::regex("/", target).map(drop),
    }
}

/// The host variables that send the sub-request to the request's own host.
pub const SAME_HOST: [&str; 3] = ["$host", "$http_host", "$best_http_host"];

/// Whether an `auth-url` has a form ramjet can reach (the registry's check; the Service itself is
/// looked up when the Ingress compiles).
pub fn auth_url(value: &str) -> Result<(), String> {
    split_auth_url(value.trim()).map(drop)
}

/// `(https, authority, path)` of an auth URL.
pub fn split_auth_url(url: &str) -> Result<(bool, &str, &str), String> {
    let (https, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => return Err(format!("`{url}` is not an http:// or https:// URL")),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if path.contains('$') || (authority.contains('$') && !SAME_HOST.contains(&authority)) {
        return Err(format!(
            "`{url}`: nginx variables other than $host as the whole host are not supported in auth-url"
        ));
    }
    if path.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
        return Err(format!("`{url}`: the path has spaces or control characters"));
    }
    Ok((https, authority, path))
}

/// A redirect target ramjet can answer with as it is: an http(s) URL or an absolute path, without
/// nginx variables. An empty value asks for no redirect (as in ingress-nginx).
pub fn redirect_location(value: &str) -> Result<&str, String> {
    let target = value.trim();
    if target.contains('$') {
        return Err(format!(
            "`{target}`: nginx variables ($request_uri, $host, ...) in a redirect target are not supported yet"
        ));
    }
    if !target.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(format!("`{target}` is not a URL (it has spaces or control characters)"));
    }
    if !(target.starts_with("http://") || target.starts_with("https://") || target.starts_with('/')) {
        return Err(format!("`{target}` is not an http(s) URL or an absolute path"));
    }
    Ok(target)
}

pub(super) fn redirect_target(value: &str) -> Result<(), String> {
    match value.trim() {
        "" => Ok(()),
        target => redirect_location(target).map(drop),
    }
}

pub(super) fn source_ranges(value: &str) -> Result<(), String> {
    ramjet_shared::parse_ranges(value).map(drop)
}

pub(super) fn count(value: &str) -> Result<(), String> {
    parse_count(value).map(drop)
}

pub(super) fn seconds(value: &str) -> Result<(), String> {
    parse_seconds(value).map(drop)
}

pub(super) fn body_size(value: &str) -> Result<(), String> {
    parse_size(value).map(drop)
}

pub(super) fn use_regex(value: &str) -> Result<(), String> {
    boolean(value)
}

pub(super) fn server_alias(value: &str) -> Result<(), String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .try_for_each(|a| crate::routes_file::validate_host(a).map(drop))
}

pub(super) fn next_upstream(value: &str) -> Result<(), String> {
    ramjet_shared::NextUpstream::parse(value, 3, None).map(drop)
}

pub(super) fn load_balance(value: &str) -> Result<(), String> {
    match value.trim() {
        "round_robin" | "ewma" => Ok(()),
        v => Err(format!("`{v}` is neither round_robin nor ewma")),
    }
}

pub(super) fn hash_by(value: &str) -> Result<(), String> {
    ramjet_shared::HashBy::parse(value.trim()).map(drop)
}

pub(super) fn auth_type(value: &str) -> Result<(), String> {
    match value.trim() {
        "basic" => Ok(()),
        "digest" => Err("digest authentication is not available; serving the Ingress without it would open it to \
                         everyone (use basic)"
            .into()),
        v => Err(format!("`{v}` is not an authentication type (basic or digest)")),
    }
}

pub(super) fn auth_secret_type(value: &str) -> Result<(), String> {
    match value.trim() {
        "auth-file" | "auth-map" => Ok(()),
        v => Err(format!("`{v}` is neither auth-file nor auth-map")),
    }
}

/// nginx's `proxy_cookie_domain` / `proxy_cookie_path` as ingress-nginx writes them: `off`, or
/// `<from> <to>` (texts; nginx's `~` regular expressions are not taken).
pub(crate) fn cookie_rewrite(value: &str) -> Result<Option<ramjet_shared::proxy_rewrite::Replace>, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    match words[..] {
        ["off"] => Ok(None),
        [from, to] if !from.starts_with('~') => Ok(Some((from.into(), to.into()))),
        [from, _] => Err(format!("`{from}`: nginx's regular expressions are not supported; give the text itself")),
        _ => Err(format!("`{value}` is neither off nor `<from> <to>`")),
    }
}

pub(super) fn cookie_rewrite_check(value: &str) -> Result<(), String> {
    cookie_rewrite(value).map(drop)
}

/// `proxy-redirect-from` / `-to`: a text, or `off` (and `default` for from), with no whitespace.
pub(crate) fn redirect_rewrite(value: &str) -> Result<(), String> {
    match value.trim() {
        "" => Err("an empty value".into()),
        v if v.starts_with('~') => Err(format!("`{v}`: nginx's regular expressions are not supported")),
        v if v.contains(char::is_whitespace) => Err(format!("`{v}` contains whitespace")),
        _ => Ok(()),
    }
}

/// nginx's `satisfy`: `all` or `any`.
pub(super) fn satisfy(value: &str) -> Result<(), String> {
    match value.trim() {
        "all" | "any" => Ok(()),
        other => Err(format!("`{other}` is neither all nor any")),
    }
}

pub(super) fn boolean(value: &str) -> Result<(), String> {
    parse_bool(value).map(drop)
}

/// `close` or `keep-alive`: ingress-nginx's `connection-proxy-header` accepts nothing else.
pub(crate) fn connection_header(value: &str) -> Result<(), String> {
    match value.trim() {
        "close" | "keep-alive" => Ok(()),
        other => Err(format!("`{other}` is neither close nor keep-alive")),
    }
}

pub(super) fn backend_protocol(value: &str) -> Result<(), String> {
    BackendProtocol::parse(value.trim()).map(drop)
}

/// `on` or `off`. ingress-nginx takes anything else for its default (`off`); ramjet does not guess
/// about a TLS setting.
pub(super) fn on_off(value: &str) -> Result<(), String> {
    match value.trim() {
        v if v.eq_ignore_ascii_case("on") || v.eq_ignore_ascii_case("off") => Ok(()),
        v => Err(format!("`{v}` is neither \"on\" nor \"off\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_ingress_nginx_validates_them() {
        assert!(app_root("/app1").is_ok());
        assert!(app_root("app1").is_err());
        assert!(app_root("http://x/app1").is_err());
        assert!(forwarded_prefix("/test/value").is_ok());
        assert!(upstream_vhost("app.internal").is_ok());
        assert!(upstream_vhost("app.internal:8080").is_ok());
        assert!(upstream_vhost("[::1]:8080").is_ok());
        assert!(upstream_vhost("$host").is_err());
        assert!(upstream_vhost("a b").is_err());
        assert!(upstream_vhost("a:port").is_err());
        assert!(forwarded_prefix("/$host").is_err());
        assert!(rewrite_target("/new/$1").is_ok());
        assert!(rewrite_target("/$request_uri").is_err());
        assert_eq!(parse_bool("True"), Ok(true));
        assert_eq!(parse_size("8m"), Ok(Some(8 << 20)));
        assert_eq!(parse_size("1K"), Ok(Some(1024)));
        assert_eq!(parse_size("100"), Ok(Some(100)));
        assert_eq!(parse_size("0"), Ok(None));
        assert!(parse_size("1.5m").is_err());
        assert!(parse_size("m").is_err());
        assert!(parse_size("99999999999999999999g").is_err());
        assert_eq!(parse_seconds("120"), Ok(Duration::from_secs(120)));
        assert!(parse_seconds("5s").is_err());
        assert!(parse_bool("yes").is_err());
    }
}

/// `auth-tls-error-page` as ingress-nginx accepts it: `[http[s]://]host[:port]` and/or `/path`
/// segments of letters, digits, `-`, `_` and `.` (spaces are dropped first). Clients are redirected
/// to it (`302`) as written; an nginx named location (`@name`) has no meaning here.
pub fn auth_tls_error_page(value: &str) -> Result<(), String> {
    let page: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    if page.starts_with('@') {
        return Err(format!("`{page}` names an nginx location; ramjet redirects to a URL or a path"));
    }
    let rest = page.strip_prefix("https://").or_else(|| page.strip_prefix("http://")).unwrap_or(&page);
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let (host, port) = authority.split_once(':').unwrap_or((authority, "0"));
    let segment = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let path_ok = segments.iter().enumerate().all(|(i, s)| (!s.is_empty() || i + 1 == segments.len()) && segment(s));
    let host_ok = host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b));
    let port_ok = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    let scheme_without_host = rest.len() != page.len() && host.is_empty();
    if page.is_empty() || !host_ok || !port_ok || !path_ok || scheme_without_host {
        return Err(format!("`{page}` is not a URL or path of letters, digits, -, _ and ."));
    }
    Ok(())
}

/// A boolean as Go's `strconv.ParseBool` reads it (ingress-nginx's `auth-tls-pass-certificate-to-upstream`).
pub fn parse_go_bool(value: &str) -> Result<bool, String> {
    match value.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!("`{other}` is not true or false")),
    }
}

/// `auth-tls-match-cn`: a regular expression that starts with `CN=`, matched anywhere in the
/// subject's distinguished name (RFC 2253, as nginx's `$ssl_client_s_dn`).
pub fn match_cn(value: &str) -> Result<ramjet_shared::Matcher, String> {
    let value = value.trim();
    if !value.starts_with("CN=") {
        return Err(format!("`{value}` does not start with CN="));
    }
    ramjet_shared::Matcher::regex(value)
}

pub(super) fn error_page(value: &str) -> Result<(), String> {
    auth_tls_error_page(value)
}

pub(super) fn go_bool(value: &str) -> Result<(), String> {
    parse_go_bool(value).map(|_| ())
}

pub(super) fn subject_pattern(value: &str) -> Result<(), String> {
    match_cn(value).map(|_| ())
}

#[cfg(test)]
mod auth_tls_tests {
    use super::auth_tls_error_page;

    #[test]
    fn error_pages_are_urls_or_paths_as_ingress_nginx_accepts_them() {
        for ok in
            ["http://1.2.3.4/error", "https://ok.com:8443/a/b.html", "ok.com/error", "/error", "/error/", "ok.com"]
        {
            assert_eq!(auth_tls_error_page(ok), Ok(()), "{ok}");
        }
        for bad in ["/error?x=1", "http://", "http://a/%41", "/a//b", "@named", "a.com:/x", "~x", "http://a:b/"] {
            assert!(auth_tls_error_page(bad).is_err(), "{bad}");
        }
    }
}
