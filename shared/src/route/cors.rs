//! ingress-nginx's CORS (`enable-cors` and the `cors-*` annotations), as its template's `CORS`
//! block does it: when the request's `Origin` is allowed, the response gets the
//! `Access-Control-*` fields (replacing the backend's), and an `OPTIONS` request is answered `204`
//! by ramjet itself.

/// One route's CORS settings, with ingress-nginx's defaults for what the annotations leave out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cors {
    /// `cors-allow-origin` as given (each trimmed); `["*"]`: any origin; empty: none (CORS never
    /// applies, as in ingress-nginx when no origin in the list is valid).
    pub origins: Box<[Box<str>]>,
    pub credentials: bool,
    pub methods: Box<str>,
    pub headers: Box<str>,
    /// Empty: no `Access-Control-Expose-Headers`.
    pub expose: Box<str>,
    /// Seconds, as decimal digits.
    pub max_age: Box<str>,
}

/// ingress-nginx's defaults (`internal/ingress/annotations/cors`).
pub const CORS_METHODS: &str = "GET, PUT, POST, DELETE, PATCH, OPTIONS";
pub const CORS_HEADERS: &str =
    "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization";
pub const CORS_MAX_AGE: &str = "1728000";

impl Cors {
    /// The `Access-Control-Allow-Origin` value for a request with this `Origin`, when CORS applies
    /// to it: `*` for any origin (whatever the request sent, as ingress-nginx's `set $http_origin
    /// *`), else the request's own origin when one of the allowed ones matches it.
    ///
    /// The match is ingress-nginx's regex `(<origin>|…)$` with `~*`: case-insensitive and anchored at
    /// the end only (so `https://a.com` also admits `xhttps://a.com`, as in ingress-nginx); a `*` in
    /// an origin stands for one DNS label (`[A-Za-z0-9-]+`).
    pub fn allow_origin<'o>(&self, origin: Option<&'o [u8]>) -> Option<&'o [u8]> {
        if let [any] = &self.origins[..] {
            if &**any == "*" {
                return Some(b"*");
            }
        }
        let origin = origin?;
        self.origins.iter().any(|allowed| suffix_matches(origin, allowed.as_bytes())).then_some(origin)
    }

    /// The fields of an allowed request, as (name, value); `allow` from [`Cors::allow_origin`].
    pub fn fields<'a>(&'a self, allow: &'a [u8]) -> impl Iterator<Item = (&'static str, &'a [u8])> {
        let fields: [(&'static str, &'a [u8], bool); 6] = [
            ("access-control-allow-origin", allow, true),
            ("access-control-allow-credentials", b"true", self.credentials),
            ("access-control-allow-methods", self.methods.as_bytes(), true),
            ("access-control-allow-headers", self.headers.as_bytes(), true),
            ("access-control-expose-headers", self.expose.as_bytes(), !self.expose.is_empty()),
            ("access-control-max-age", self.max_age.as_bytes(), true),
        ];
        fields.into_iter().filter(|f| f.2).map(|(n, v, _)| (n, v))
    }
}

/// Whether `origin` ends with a match of `allowed` (case-insensitive; its first `*` is one label).
fn suffix_matches(origin: &[u8], allowed: &[u8]) -> bool {
    let Some(star) = allowed.iter().position(|&b| b == b'*') else {
        return ends_with_ci(origin, allowed);
    };
    let (prefix, suffix) = (&allowed[..star], &allowed[star + 1..]);
    if !ends_with_ci(origin, suffix) {
        return false;
    }
    let rest = &origin[..origin.len() - suffix.len()];
    let label = rest.iter().rev().take_while(|b| b.is_ascii_alphanumeric() || **b == b'-').count();
    // The label is one or more characters; what comes before it must end with the prefix (which
    // ends with `//` or `.`, never with a label character, so the longest label is the only one).
    (1..=label).any(|n| ends_with_ci(&rest[..rest.len() - n], prefix))
}

fn ends_with_ci(text: &[u8], end: &[u8]) -> bool {
    text.len() >= end.len() && text[text.len() - end.len()..].eq_ignore_ascii_case(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cors(origins: &[&str]) -> Cors {
        Cors {
            origins: origins.iter().map(|o| (*o).into()).collect(),
            credentials: true,
            methods: CORS_METHODS.into(),
            headers: CORS_HEADERS.into(),
            expose: "".into(),
            max_age: CORS_MAX_AGE.into(),
        }
    }

    #[test]
    fn origins_match_as_ingress_nginx_regex_does() {
        let any = cors(&["*"]);
        assert_eq!(any.allow_origin(None), Some(&b"*"[..]));
        assert_eq!(cors(&[]).allow_origin(Some(b"https://a.com")), None);
        let list = cors(&["https://origin.cors.com:8080", "https://*.sub.cors.com"]);
        assert_eq!(
            list.allow_origin(Some(b"https://origin.cors.com:8080")),
            Some(&b"https://origin.cors.com:8080"[..])
        );
        assert!(list.allow_origin(Some(b"HTTPS://Origin.Cors.com:8080")).is_some());
        assert!(list.allow_origin(Some(b"https://origin.cors.com")).is_none());
        assert!(list.allow_origin(Some(b"https://a-1.sub.cors.com")).is_some());
        assert!(list.allow_origin(Some(b"https://sub.cors.com")).is_none(), "a label is one or more characters");
        assert!(list.allow_origin(Some(b"https://a.b.sub.cors.com")).is_none(), "`*` is one label");
        assert!(list.allow_origin(Some(b"http://a.sub.cors.com")).is_none());
        assert!(list.allow_origin(None).is_none());
        assert!(list.allow_origin(Some(b"")).is_none());
    }
}
