//! What a rule changes on the way (Gateway API's HTTPRoute filters): header edits on the request
//! and the response, a rewrite of the path and `Host` sent upstream, a redirect answered by ramjet.
//! Everything is validated and lower-cased at compile time; the worker only copies bytes.
//!
//! Paths are rewritten by the one [`PathRewrite`] type ingress-nginx's `rewrite-target` uses too.
//!
//! ```
//! use ramjet_shared::{PathRewrite, RewriteScratch};
//!
//! // `PathPrefix /shop` with `ReplacePrefixMatch: /store`.
//! let rewrite = PathRewrite::Prefix { matched: "/shop".into(), with: "/store".into() };
//! let mut scratch = RewriteScratch::default();
//! assert!(rewrite.apply(b"/shop/cart", &mut scratch));
//! assert_eq!(scratch.path, b"/store/cart");
//! ```

use std::cell::RefCell;
use std::fmt;

use super::rewrite::{PathRewrite, RewriteScratch};

/// Header changes: `remove` and `set` names drop every field of that name, then `set` and `add`
/// fields are appended. Names are lower case, values valid field values (checked at compile time).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HeaderEdits {
    pub set: Box<[(Box<str>, Box<str>)]>,
    pub add: Box<[(Box<str>, Box<str>)]>,
    pub remove: Box<[Box<str>]>,
}

impl HeaderEdits {
    /// Whether a field of this name (any case) is dropped.
    #[inline]
    pub fn drops(&self, name: &[u8]) -> bool {
        self.remove.iter().any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
            || self.set.iter().any(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
    }

    /// These edits, then `later`'s, as one: what `later` drops goes, whoever appended it; the
    /// fields both append come in order, these first.
    pub fn then(&self, later: &HeaderEdits) -> HeaderEdits {
        let kept = |list: &[(Box<str>, Box<str>)]| -> Vec<(Box<str>, Box<str>)> {
            list.iter().filter(|(n, _)| !later.drops(n.as_bytes())).cloned().collect()
        };
        let (mut set, mut add) = (kept(&self.set), kept(&self.add));
        set.extend(later.set.iter().cloned());
        add.extend(later.add.iter().cloned());
        let mut remove: Vec<Box<str>> = self.remove.to_vec();
        for name in later.remove.iter() {
            if !remove.iter().any(|r| r.eq_ignore_ascii_case(name)) {
                remove.push(name.clone());
            }
        }
        HeaderEdits { set: set.into(), add: add.into(), remove: remove.into() }
    }

    /// The fields appended, in order: `set` then `add`.
    pub fn appended(&self) -> impl Iterator<Item = (&str, &str)> {
        self.set.iter().chain(self.add.iter()).map(|(n, v)| (&**n, &**v))
    }
}

impl fmt::Display for HeaderEdits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        parts.extend(self.set.iter().map(|(n, v)| format!("set {n}: {v}")));
        parts.extend(self.add.iter().map(|(n, v)| format!("add {n}: {v}")));
        parts.extend(self.remove.iter().map(|n| format!("remove {n}")));
        f.write_str(&parts.join(", "))
    }
}

/// The request sent upstream carries another path and/or `Host`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rewrite {
    pub host: Option<Box<str>>,
    pub path: Option<PathRewrite>,
}

/// Ramjet answers with a redirect built from the request: each part not given is the request's own
/// (the query is always kept). Made whole by [`Redirect::new`], which renders what does not depend
/// on the request once, for a request over plain HTTP and one over TLS: the status line and the
/// `location` up to the first part the request gives (a redirect that names its scheme, host, port
/// and full path is all rendered but the query). A request then only adds its own parts: its host
/// and port (from its `Host`), its path or what follows the replaced prefix, and its query.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Redirect {
    /// `http` or `https`; `None`: the scheme the request came in with.
    scheme: Option<Box<str>>,
    host: Option<Box<str>>,
    /// `None`: the request's port when the scheme is unchanged, otherwise the scheme's own.
    port: Option<u16>,
    path: Option<PathRewrite>,
    /// 301, 302 (the default), 303, 307 or 308.
    status: u16,
    /// The answer as far as it is fixed: to a request over plain HTTP, and over TLS. Rendered
    /// from the fields above, which say all it does.
    #[serde(skip)]
    plans: [Plan; 2],
}

/// One redirect's answer to a request that came one way (plain HTTP or TLS).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Plan {
    /// `HTTP/1.1 <status> <reason>\r\nlocation: <scheme>://`, then the host when it is fixed, and the
    /// port and path too when the request's host and port do not come between.
    start: Box<[u8]>,
    /// Where the location starts in `start`.
    location: usize,
    /// The request's host name comes next (lower case).
    host: bool,
    /// The request's port comes next, unless it is this one (the scheme's default).
    port: Option<u16>,
    /// After the request's host and port: a fixed port, then the fixed path or the prefix's
    /// replacement.
    then: Box<[u8]>,
    path: PathFrom,
}

/// Where the path of a redirect's location comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathFrom {
    /// It is fixed (in the plan's bytes).
    Fixed,
    /// The request's path, as it came.
    Request,
    /// `ReplacePrefixMatch`: the request's path after the `skip` bytes of the matched prefix, one
    /// `/` between the replacement and it, and `/` when both are empty (`root`: the replacement is).
    Rest { skip: usize, root: bool },
    /// Another rewrite (a regex), applied per request.
    Rewrite,
}

/// What ends a redirect's HTTP/1.1 head (before the caller's fields).
const REDIRECT_END: &[u8] = b"\r\ncontent-length: 0\r\n";

impl Redirect {
    /// A redirect with these parts (`None`: the request's own), rendered as far as it is fixed.
    /// A host is written lower case; `status` is one of 301, 302, 303, 307 and 308.
    pub fn new(
        scheme: Option<Box<str>>,
        host: Option<Box<str>>,
        port: Option<u16>,
        path: Option<PathRewrite>,
        status: u16,
    ) -> Self {
        let plans =
            [false, true].map(|tls| Plan::new(scheme.as_deref(), host.as_deref(), port, path.as_ref(), status, tls));
        Redirect { scheme, host, port, path, status, plans }
    }

    /// This redirect for a rule's match on the path prefix `matched` (without a trailing `/`): a
    /// `ReplacePrefixMatch` replaces that prefix.
    pub fn for_prefix(&self, matched: &str) -> Self {
        let path = match &self.path {
            Some(PathRewrite::Prefix { with, .. }) => {
                Some(PathRewrite::Prefix { matched: matched.into(), with: with.clone() })
            }
            other => other.clone(),
        };
        Redirect::new(self.scheme.clone(), self.host.clone(), self.port, path, self.status)
    }

    /// The answer's status.
    #[inline]
    pub fn status(&self) -> u16 {
        self.status
    }

    /// How the path is made, if not the request's.
    pub fn path(&self) -> Option<&PathRewrite> {
        self.path.as_ref()
    }

    /// Writes the `Location` for a request to `out`: `tls` says how it came, `host` is its `Host`
    /// (valid as RFC 9112 says, with a port if it had one), `target` its origin-form target (the
    /// query is kept); `scratch` is the worker's rewrite memory (only a regex rewrite uses it).
    #[inline]
    pub fn location(&self, tls: bool, host: &str, target: &str, scratch: &RefCell<RewriteScratch>, out: &mut Vec<u8>) {
        let plan = &self.plans[tls as usize];
        self.write(plan, &plan.start[plan.location..], host, target, scratch, out);
    }

    /// Writes the answer's HTTP/1.1 head for a request, as [`Redirect::location`] takes it, to
    /// `out`: the status line, `location` and `content-length: 0`, each line ending in CRLF (the
    /// caller adds its fields and the blank line).
    #[inline]
    pub fn head(&self, tls: bool, host: &str, target: &str, scratch: &RefCell<RewriteScratch>, out: &mut Vec<u8>) {
        let plan = &self.plans[tls as usize];
        self.write(plan, &plan.start, host, target, scratch, out);
        out.extend_from_slice(REDIRECT_END);
    }

    /// `start` (the plan's, whole or from the location on), then the request's parts.
    #[inline]
    fn write(
        &self,
        plan: &Plan,
        start: &[u8],
        host: &str,
        target: &str,
        scratch: &RefCell<RewriteScratch>,
        out: &mut Vec<u8>,
    ) {
        // Targets are short: a plain scan beats `memchr`'s set-up.
        let (path, query) = match target.bytes().position(|b| b == b'?') {
            Some(i) => target.as_bytes().split_at(i),
            None => (target.as_bytes(), &b""[..]),
        };
        // Enough for every piece but a regex rewrite's (`:` and five digits for a port).
        out.reserve(start.len() + host.len() + 6 + plan.then.len() + path.len() + 1 + query.len() + REDIRECT_END.len());
        out.extend_from_slice(start);
        if plan.host || plan.port.is_some() {
            let (name, port) = split_port(host);
            if plan.host {
                // Copied, then lower-cased in place (a loop the compiler vectorizes).
                let at = out.len();
                out.extend_from_slice(name.as_bytes());
                out[at..].make_ascii_lowercase();
            }
            if let Some(p) = port.filter(|p| plan.port.is_some_and(|default| *p != default)) {
                push_port(out, p);
            }
        }
        // Empty pieces are common (no query, no rest of the path): each copy costs a call.
        if !plan.then.is_empty() {
            out.extend_from_slice(&plan.then);
        }
        match plan.path {
            PathFrom::Fixed => {}
            PathFrom::Request => out.extend_from_slice(path),
            PathFrom::Rest { skip, root } => {
                let rest = path.get(skip..).unwrap_or(b"");
                match rest.first() {
                    None if root => out.push(b'/'),
                    None => {}
                    Some(b'/') => out.extend_from_slice(rest),
                    Some(_) => {
                        out.push(b'/');
                        out.extend_from_slice(rest);
                    }
                }
            }
            PathFrom::Rewrite => {
                if let Some(rewrite) = &self.path {
                    rewrite.append(path, &mut scratch.borrow_mut(), out);
                }
            }
        }
        if !query.is_empty() {
            out.extend_from_slice(query);
        }
    }
}

impl Plan {
    fn new(
        scheme: Option<&str>,
        host: Option<&str>,
        port: Option<u16>,
        path: Option<&PathRewrite>,
        status: u16,
        tls: bool,
    ) -> Self {
        let came = if tls { "https" } else { "http" };
        let scheme = scheme.unwrap_or(came);
        let default = if scheme == "https" { 443 } else { 80 };
        let mut start = format!("HTTP/1.1 {status} {}\r\nlocation: ", super::reason_phrase(status)).into_bytes();
        let location = start.len();
        start.extend_from_slice(scheme.as_bytes());
        start.extend_from_slice(b"://");
        if let Some(host) = host {
            start.extend(host.bytes().map(|b| b.to_ascii_lowercase()));
        }
        // A port not given is the request's when the scheme stays, else the scheme's own.
        let request_port = (port.is_none() && scheme == came).then_some(default);
        let mut then = Vec::new();
        if let Some(p) = port.filter(|p| *p != default) {
            push_port(&mut then, p);
        }
        let path = match path {
            None => PathFrom::Request,
            Some(PathRewrite::Full(p)) => {
                then.extend_from_slice(p.as_bytes());
                PathFrom::Fixed
            }
            Some(PathRewrite::Prefix { matched, with }) => {
                let with = with.strip_suffix('/').unwrap_or(with);
                then.extend_from_slice(with.as_bytes());
                PathFrom::Rest { skip: matched.len(), root: with.is_empty() }
            }
            Some(PathRewrite::Regex(_)) => PathFrom::Rewrite,
        };
        if host.is_some() && request_port.is_none() {
            // Nothing of the request's comes between: one piece.
            start.append(&mut then);
        }
        Plan {
            start: start.into_boxed_slice(),
            location,
            host: host.is_none(),
            port: request_port,
            then: then.into_boxed_slice(),
            path,
        }
    }
}

/// Appends `:<port>`.
fn push_port(out: &mut Vec<u8>, p: u16) {
    out.push(b':');
    let digits = [p / 10000, p / 1000 % 10, p / 100 % 10, p / 10 % 10, p % 10];
    let first = digits.iter().position(|d| *d != 0).unwrap_or(4);
    out.extend(digits[first..].iter().map(|d| b'0' + *d as u8));
}

/// `example.com:8080` → (`example.com`, 8080); an IPv6 literal keeps its brackets. In a valid
/// `Host` a colon outside the brackets can only start the port, which is digits to the end: only
/// those are looked at.
#[inline]
fn split_port(host: &str) -> (&str, Option<u16>) {
    let digits = host.bytes().rev().take_while(u8::is_ascii_digit).count();
    let colon = host.len() - digits;
    match colon.checked_sub(1) {
        Some(i) if host.as_bytes()[i] == b':' => (&host[..i], host[colon..].parse().ok()),
        _ => (host, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(r: &Redirect, tls: bool, host: &str, target: &str) -> String {
        let mut out = Vec::new();
        r.location(tls, host, target, &RefCell::default(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn redirects_keep_what_they_do_not_change() {
        let redirect = |scheme: Option<&str>, host: Option<&str>, port: Option<u16>| {
            Redirect::new(scheme.map(Into::into), host.map(Into::into), port, None, 302)
        };
        assert_eq!(
            location(&redirect(Some("https"), None, None), false, "Shop.test:8080", "/a?b=1"),
            "https://shop.test/a?b=1"
        );
        assert_eq!(
            location(&redirect(None, Some("new.test"), None), false, "shop.test:8080", "/a"),
            "http://new.test:8080/a"
        );
        assert_eq!(location(&redirect(None, None, Some(443)), true, "shop.test", "/"), "https://shop.test/");
        assert_eq!(location(&redirect(Some("http"), None, Some(8081)), true, "[::1]:8443", "/"), "http://[::1]:8081/");
        let full = Redirect::new(None, None, None, Some(PathRewrite::Full("/moved".into())), 302);
        assert_eq!(location(&full, false, "shop.test", "/old/x?q"), "http://shop.test/moved?q");
    }

    #[test]
    fn a_fixed_redirect_is_rendered_whole_but_the_query() {
        let fixed = Redirect::new(
            Some("https".into()),
            Some("New.Test".into()),
            Some(8443),
            Some(PathRewrite::Full("/moved".into())),
            301,
        );
        for plan in &fixed.plans {
            assert_eq!(&*plan.start, b"HTTP/1.1 301 Moved Permanently\r\nlocation: https://new.test:8443/moved");
            assert!(!plan.host && plan.port.is_none() && plan.then.is_empty() && plan.path == PathFrom::Fixed);
        }
        let mut head = Vec::new();
        fixed.head(false, "shop.test", "/old?a=1", &RefCell::default(), &mut head);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 301 Moved Permanently\r\nlocation: https://new.test:8443/moved?a=1\r\ncontent-length: 0\r\n"
        );
    }

    #[test]
    fn a_prefix_redirect_keeps_the_rest_of_the_path() {
        let prefix = |with: &str| {
            Redirect::new(None, None, None, Some(PathRewrite::Prefix { matched: "".into(), with: with.into() }), 302)
                .for_prefix("/old")
        };
        assert_eq!(location(&prefix("/new"), false, "Shop.test", "/old"), "http://shop.test/new");
        assert_eq!(location(&prefix("/new/"), false, "shop.test", "/old/a/b?q=1"), "http://shop.test/new/a/b?q=1");
        assert_eq!(location(&prefix("/"), true, "shop.test:443", "/old"), "https://shop.test/");
        assert_eq!(location(&prefix("/"), true, "shop.test:8443", "/old/x"), "https://shop.test:8443/x");
    }

    /// The location as it was written before redirects were rendered ahead: every part computed
    /// per request.
    fn reference(r: &Redirect, tls: bool, host: &str, target: &str) -> String {
        let came = if tls { "https" } else { "http" };
        let scheme = r.scheme.as_deref().unwrap_or(came);
        let (request_host, request_port) = match host.rfind(':') {
            Some(i) if !host[i..].contains(']') => (&host[..i], host[i + 1..].parse::<u16>().ok()),
            _ => (host, None),
        };
        let mut out = format!("{scheme}://{}", r.host.as_deref().unwrap_or(request_host).to_ascii_lowercase());
        let port = match r.port {
            Some(p) => Some(p),
            None if scheme == came => request_port,
            None => None,
        };
        let default = if scheme == "https" { 443 } else { 80 };
        if let Some(p) = port.filter(|p| *p != default) {
            out.push_str(&format!(":{p}"));
        }
        let (path, query) = target.split_at(target.find('?').unwrap_or(target.len()));
        match &r.path {
            Some(rewrite) => {
                let mut scratch = RewriteScratch::default();
                let mut rewritten = Vec::new();
                rewrite.append(path.as_bytes(), &mut scratch, &mut rewritten);
                out.push_str(std::str::from_utf8(&rewritten).unwrap());
            }
            None => out.push_str(path),
        }
        out + query
    }

    #[test]
    fn the_rendered_location_is_the_one_computed_per_request() {
        let paths = [
            None,
            Some(PathRewrite::Full("/moved".into())),
            Some(PathRewrite::Prefix { matched: "/old".into(), with: "/new".into() }),
            Some(PathRewrite::Prefix { matched: "/old".into(), with: "/".into() }),
            Some(PathRewrite::Prefix { matched: "".into(), with: "/v2/".into() }),
            Some(PathRewrite::regex("/old(/|$)(.*)", "/r/$2").unwrap()),
        ];
        let hosts = ["shop.test", "Shop.Test:8080", "shop.test:80", "shop.test:443", "shop.test:", "shop.test:99999"];
        let hosts = hosts.into_iter().chain(["[::1]", "[::1]:8443", "10.0.0.1:81", "a1"]);
        let hosts: Vec<&str> = hosts.collect();
        let targets = ["/", "/old", "/old/", "/old/a?b=1&c", "/oldish", "/?", "/old?x"];
        for scheme in [None, Some("http"), Some("https")] {
            for host in [None, Some("new.test"), Some("New.Test")] {
                for port in [None, Some(80), Some(443), Some(8081)] {
                    for path in &paths {
                        for status in [301, 308] {
                            let r =
                                Redirect::new(scheme.map(Into::into), host.map(Into::into), port, path.clone(), status);
                            for tls in [false, true] {
                                for request_host in &hosts {
                                    for target in targets {
                                        let want = reference(&r, tls, request_host, target);
                                        assert_eq!(location(&r, tls, request_host, target), want, "{r:?} {tls}");
                                        let mut head = Vec::new();
                                        r.head(tls, request_host, target, &RefCell::default(), &mut head);
                                        let reason = super::super::reason_phrase(status);
                                        assert_eq!(
                                            String::from_utf8(head).unwrap(),
                                            format!(
                                                "HTTP/1.1 {status} {reason}\r\nlocation: {want}\r\ncontent-length: 0\r\n"
                                            )
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
