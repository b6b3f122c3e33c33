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

use std::fmt;

use sha2::{Digest as _, Sha256};

use super::rewrite::{PathRewrite, RewriteScratch};

/// Header changes: `remove` and `set` names drop every field of that name, then `set` and `add`
/// fields are appended. Names are lower case, values valid field values (checked at compile time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
        remove.extend(
            later
                .remove
                .iter()
                .filter(|n| !remove.iter().any(|r| r.eq_ignore_ascii_case(n)))
                .cloned()
                .collect::<Vec<_>>(),
        );
        HeaderEdits { set: set.into(), add: add.into(), remove: remove.into() }
    }

    /// The fields appended, in order: `set` then `add`.
    pub fn appended(&self) -> impl Iterator<Item = (&str, &str)> {
        self.set.iter().chain(self.add.iter()).map(|(n, v)| (&**n, &**v))
    }

    fn hash_into(&self, h: &mut Sha256) {
        for (tag, list) in [(b"s", &self.set), (b"a", &self.add)] {
            for (n, v) in list.iter() {
                h.update(tag);
                h.update(n.as_bytes());
                h.update([0]);
                h.update(v.as_bytes());
                h.update([0]);
            }
        }
        for n in self.remove.iter() {
            h.update(b"r");
            h.update(n.as_bytes());
            h.update([0]);
        }
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    pub host: Option<Box<str>>,
    pub path: Option<PathRewrite>,
}

/// Ramjet answers with a redirect built from the request: each part not given is the request's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// `http` or `https`; `None`: the scheme the request came in with.
    pub scheme: Option<Box<str>>,
    pub host: Option<Box<str>>,
    /// `None`: the request's port when the scheme is unchanged, otherwise the scheme's own.
    pub port: Option<u16>,
    pub path: Option<PathRewrite>,
    /// 301, 302 (the default), 303, 307 or 308.
    pub status: u16,
}

impl Redirect {
    /// Writes the `Location` for a request to `out`: `tls` says how it came, `host` is its `Host`
    /// (with a port, if it had one), `target` its origin-form target (the query is kept);
    /// `scratch` is the worker's rewrite memory.
    pub fn location(&self, tls: bool, host: &str, target: &str, scratch: &mut RewriteScratch, out: &mut Vec<u8>) {
        let came = if tls { "https" } else { "http" };
        let scheme = self.scheme.as_deref().unwrap_or(came);
        let (request_host, request_port) = split_port(host);
        out.extend_from_slice(scheme.as_bytes());
        out.extend_from_slice(b"://");
        out.extend(self.host.as_deref().unwrap_or(request_host).bytes().map(|b| b.to_ascii_lowercase()));
        let port = match self.port {
            Some(p) => Some(p),
            None if scheme == came => request_port,
            None => None,
        };
        let default = if scheme == "https" { 443 } else { 80 };
        if let Some(p) = port.filter(|p| *p != default) {
            out.push(b':');
            let digits = [p / 10000, p / 1000 % 10, p / 100 % 10, p / 10 % 10, p % 10];
            let first = digits.iter().position(|d| *d != 0).unwrap_or(4);
            out.extend(digits[first..].iter().map(|d| b'0' + *d as u8));
        }
        let (path, query) = match target.find('?') {
            Some(i) => (&target[..i], &target[i..]),
            None => (target, ""),
        };
        match &self.path {
            Some(rewrite) => rewrite.append(path.as_bytes(), scratch, out),
            None => out.extend_from_slice(path.as_bytes()),
        }
        out.extend_from_slice(query.as_bytes());
    }
}

/// `example.com:8080` → (`example.com`, 8080); an IPv6 literal keeps its brackets.
fn split_port(host: &str) -> (&str, Option<u16>) {
    match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => (&host[..i], host[i + 1..].parse().ok()),
        _ => (host, None),
    }
}

pub(super) fn hash_rewrite(rewrite: &Rewrite, h: &mut Sha256) {
    h.update(b"rewrite");
    h.update(rewrite.host.as_deref().unwrap_or("").as_bytes());
    h.update([0]);
    if let Some(p) = &rewrite.path {
        p.hash_into(h);
    }
}

pub(super) fn hash_redirect(redirect: &Redirect, h: &mut Sha256) {
    h.update(b"redirect");
    h.update(redirect.scheme.as_deref().unwrap_or("").as_bytes());
    h.update([0]);
    h.update(redirect.host.as_deref().unwrap_or("").as_bytes());
    h.update([0]);
    h.update(redirect.port.unwrap_or(0).to_be_bytes());
    h.update(redirect.status.to_be_bytes());
    if let Some(p) = &redirect.path {
        p.hash_into(h);
    }
}

pub(super) fn hash_edits(tag: &[u8], edits: &HeaderEdits, h: &mut Sha256) {
    h.update(tag);
    edits.hash_into(h);
    h.update([0]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_keep_what_they_do_not_change() {
        let redirect = |scheme: Option<&str>, host: Option<&str>, port: Option<u16>| Redirect {
            scheme: scheme.map(Into::into),
            host: host.map(Into::into),
            port,
            path: None,
            status: 302,
        };
        let location = |r: &Redirect, tls: bool, host: &str, target: &str| {
            let mut out = Vec::new();
            r.location(tls, host, target, &mut RewriteScratch::default(), &mut out);
            String::from_utf8(out).unwrap()
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
        let full = Redirect { path: Some(PathRewrite::Full("/moved".into())), ..redirect(None, None, None) };
        assert_eq!(location(&full, false, "shop.test", "/old/x?q"), "http://shop.test/moved?q");
    }
}
