//! nginx's rewrites of a backend's answer, as ingress-nginx's `proxy-redirect-from`/`-to` and
//! `proxy-cookie-domain`/`-path` set them (`proxy_redirect`, `proxy_cookie_domain`,
//! `proxy_cookie_path`): a `Location` (or `Refresh` URL) that starts with one text starts with
//! another, and a `Set-Cookie`'s `Domain` or `Path` attribute is replaced.

use std::fmt;

/// A text to find and the text that replaces it.
pub type Replace = (Box<str>, Box<str>);

/// The rewrites one route applies to its backends' answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProxyRewrites {
    /// `proxy_redirect from to`: a `Location`, or a `Refresh`'s `url=`, starting with `from`.
    pub redirect: Option<Replace>,
    /// `proxy_cookie_domain from to`: a `Domain` attribute equal to `from` (case-insensitive, a
    /// leading dot ignored).
    pub cookie_domain: Option<Replace>,
    /// `proxy_cookie_path from to`: a `Path` attribute starting with `from`.
    pub cookie_path: Option<Replace>,
}

impl ProxyRewrites {
    /// Whether a field named `name` (lower case) may be rewritten.
    pub fn concerns(&self, name: &[u8]) -> bool {
        match name {
            b"location" | b"refresh" => self.redirect.is_some(),
            b"set-cookie" => self.cookie_domain.is_some() || self.cookie_path.is_some(),
            _ => false,
        }
    }

    /// The value of field `name` (lower case) rewritten into `out`; `false` (and `out` untouched)
    /// when nothing in it changes.
    pub fn rewrite(&self, name: &[u8], value: &[u8], out: &mut Vec<u8>) -> bool {
        match name {
            b"location" => self.redirect.as_ref().is_some_and(|(from, to)| replace_prefix(value, 0, from, to, out)),
            b"refresh" => {
                let Some((from, to)) = &self.redirect else { return false };
                // `5; url=http://…`: the URL after `url=`.
                let lower = value.to_ascii_lowercase();
                let Some(at) = lower.windows(4).position(|w| w == b"url=") else { return false };
                replace_prefix(value, at + 4, from, to, out)
            }
            b"set-cookie" => self.rewrite_cookie(value, out),
            _ => false,
        }
    }

    fn rewrite_cookie(&self, value: &[u8], out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let mut changed = false;
        for (i, part) in value.split(|&b| b == b';').enumerate() {
            if i > 0 {
                out.push(b';');
            }
            let (lead, rest) = part.split_at(part.iter().take_while(|b| b.is_ascii_whitespace()).count());
            let attribute = rest.iter().position(|&b| b == b'=').map(|eq| (&rest[..eq], &rest[eq + 1..]));
            let replaced = match attribute {
                Some((name, v)) if i > 0 && name.eq_ignore_ascii_case(b"domain") => {
                    self.cookie_domain.as_ref().and_then(|(from, to)| {
                        let bare = v.strip_prefix(b".").unwrap_or(v);
                        bare.eq_ignore_ascii_case(from.trim_start_matches('.').as_bytes())
                            .then(|| (name, to.as_bytes().to_vec()))
                    })
                }
                Some((name, v)) if i > 0 && name.eq_ignore_ascii_case(b"path") => {
                    self.cookie_path.as_ref().and_then(|(from, to)| {
                        v.strip_prefix(from.as_bytes()).map(|tail| (name, [to.as_bytes(), tail].concat()))
                    })
                }
                _ => None,
            };
            out.extend_from_slice(lead);
            match replaced {
                Some((name, v)) => {
                    out.extend_from_slice(name);
                    out.push(b'=');
                    out.extend_from_slice(&v);
                    changed = true;
                }
                None => out.extend_from_slice(rest),
            }
        }
        if !changed {
            out.truncate(start);
        }
        changed
    }
}

/// `value` with `from` at `at` replaced by `to` into `out`, if `from` is there.
fn replace_prefix(value: &[u8], at: usize, from: &str, to: &str, out: &mut Vec<u8>) -> bool {
    if !value[at..].starts_with(from.as_bytes()) {
        return false;
    }
    out.extend_from_slice(&value[..at]);
    out.extend_from_slice(to.as_bytes());
    out.extend_from_slice(&value[at + from.len()..]);
    true
}

impl fmt::Display for ProxyRewrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (what, pair) in
            [("redirect", &self.redirect), ("cookie domain", &self.cookie_domain), ("cookie path", &self.cookie_path)]
        {
            if let Some((from, to)) = pair {
                parts.push(format!("{what} {from} -> {to}"));
            }
        }
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrites() -> ProxyRewrites {
        ProxyRewrites {
            redirect: Some(("hello.com".into(), "goodbye.com".into())),
            cookie_domain: Some(("localhost".into(), "example.org".into())),
            cookie_path: Some(("/one/".into(), "/".into())),
        }
    }

    fn rewritten(name: &str, value: &str) -> Option<String> {
        let mut out = Vec::new();
        rewrites().rewrite(name.as_bytes(), value.as_bytes(), &mut out).then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn locations_and_refresh_urls_that_start_with_from_start_with_to() {
        assert_eq!(rewritten("location", "hello.com/a?b").as_deref(), Some("goodbye.com/a?b"));
        assert_eq!(rewritten("location", "http://hello.com/a"), None, "a prefix, as nginx's proxy_redirect");
        assert_eq!(rewritten("refresh", "5; URL=hello.com/x").as_deref(), Some("5; URL=goodbye.com/x"));
        assert_eq!(rewritten("refresh", "5"), None);
    }

    #[test]
    fn cookie_domains_and_paths_are_replaced_as_nginx_does() {
        assert_eq!(
            rewritten("set-cookie", "sid=1; Domain=.LocalHost; Path=/one/two; HttpOnly").as_deref(),
            Some("sid=1; Domain=example.org; Path=/two; HttpOnly")
        );
        assert_eq!(
            rewritten("set-cookie", "path=/one/; domain=other.test"),
            None,
            "the cookie's own name is not an attribute"
        );
        assert_eq!(rewritten("set-cookie", "sid=1; Path=/other/"), None);
    }
}
