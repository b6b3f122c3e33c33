//! External authentication (ingress-nginx's `auth-url` and its companions, nginx's
//! `auth_request`): before a request is proxied, the worker asks an authentication service with a
//! sub-request that carries the request's fields but not its body. A 2xx answer lets the request
//! through (with `auth-response-headers` copied from it onto the request); 401 and 403 are the
//! client's answer (401 becomes a redirect to `auth-signin` when there is one); anything else is
//! a 500.
//!
//! The service is a Service of the cluster (`http://<service>.<namespace>.svc…/path`), or the
//! request's own host (`https://$host/oauth2/auth`, oauth2-proxy's usual set-up): then the
//! sub-request goes to the backend of the route that host and path have in the serving table.

use std::fmt;
use std::sync::Arc;

use super::Backend;

/// Where the sub-request goes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum AuthService {
    /// A Service's endpoints; `host` is the `Host` the sub-request carries.
    Backend {
        #[serde(serialize_with = "Backend::serialize_digest")]
        backend: Arc<Backend>,
        host: Box<str>,
    },
    /// The backend of the route for the request's own host and this path.
    SameHost,
}

/// One route's external authentication.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExternalAuth {
    pub service: AuthService,
    /// `auth-url` as given, for the audit trail.
    pub url: Box<str>,
    /// The sub-request's target (path and query of `auth-url`).
    pub target: Box<str>,
    /// `auth-method`; `None`: the request's own.
    pub method: Option<Box<str>>,
    /// `auth-response-headers`, lower case: copied from a 2xx answer onto the proxied request.
    pub response_headers: Box<[Box<str>]>,
    /// `auth-signin`, with ingress-nginx's `rd` parameter (`auth-signin-redirect-param`) added
    /// when it has none; nginx variables in it are filled in per request ([`expand`]).
    pub signin: Option<Box<str>>,
    /// `auth-request-redirect`; `None`: the request's target.
    pub request_redirect: Option<Box<str>>,
    /// `auth-always-set-cookie`: the service's cookies go on every response, not only on
    /// successful and redirecting ones.
    pub always_set_cookie: bool,
    /// `auth-proxy-set-headers`: fields (lower-case name, value) set on the sub-request, in place
    /// of the client's own.
    pub set_headers: Box<[(Box<str>, Box<str>)]>,
}

impl fmt::Display for ExternalAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "external auth by {}", self.url)?;
        if let Some(m) = &self.method {
            write!(f, " ({m})")?;
        }
        if !self.response_headers.is_empty() {
            write!(f, ", passing {}", self.response_headers.join(","))?;
        }
        if let Some(s) = &self.signin {
            write!(f, ", sign-in at {s}")?;
        }
        if let Some(r) = &self.request_redirect {
            write!(f, ", redirect {r}")?;
        }
        if self.always_set_cookie {
            f.write_str(", cookies always")?;
        }
        if !self.set_headers.is_empty() {
            let names: Vec<&str> = self.set_headers.iter().map(|(n, _)| &**n).collect();
            write!(f, ", setting {}", names.join(","))?;
        }
        Ok(())
    }
}

/// What a sign-in URL's variables are filled from.
pub struct SigninRequest<'a> {
    pub tls: bool,
    /// `Host` as sent.
    pub host: &'a [u8],
    /// The request target as sent.
    pub target: &'a [u8],
}

/// The variables a sign-in URL may use.
pub const SIGNIN_VARIABLES: [&str; 6] =
    ["$escaped_request_uri", "$request_uri", "$pass_access_scheme", "$scheme", "$http_host", "$host"];

/// `template` with its variables filled in: `$host`/`$http_host` (the host as sent),
/// `$scheme`/`$pass_access_scheme`, `$request_uri`, and `$escaped_request_uri` (percent-encoded
/// as nginx's `set_escape_uri` does).
pub fn expand(template: &str, req: &SigninRequest<'_>, out: &mut Vec<u8>) {
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.extend_from_slice(&rest.as_bytes()[..at]);
        rest = &rest[at..];
        let Some(name) = SIGNIN_VARIABLES.iter().find(|v| rest.starts_with(**v)) else {
            out.push(b'$');
            rest = &rest[1..];
            continue;
        };
        match *name {
            "$escaped_request_uri" => escape_uri(req.target, out),
            "$request_uri" => out.extend_from_slice(req.target),
            "$pass_access_scheme" | "$scheme" => out.extend_from_slice(if req.tls { b"https" } else { b"http" }),
            _ => out.extend_from_slice(req.host),
        }
        rest = &rest[name.len()..];
    }
    out.extend_from_slice(rest.as_bytes());
}

/// Percent-encodes what `set_escape_uri` does: everything but unreserved characters.
fn escape_uri(text: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in text {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

/// `auth-signin` with the redirect parameter ingress-nginx adds (`buildAuthSignURL`): none in the
/// query, `?<param>=$pass_access_scheme://$http_host$escaped_request_uri`; a query without it,
/// the same after `&`; a query with it, unchanged.
pub fn signin_with_redirect(url: &str, param: &str) -> String {
    let redirect = format!("{param}=$pass_access_scheme://$http_host$escaped_request_uri");
    match url.split_once('?') {
        None => format!("{url}?{redirect}"),
        Some((_, query)) if query.split('&').any(|p| p.split('=').next() == Some(param)) => url.to_string(),
        Some(_) => format!("{url}&{redirect}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_urls_carry_the_request_back() {
        let url = signin_with_redirect("https://$host/oauth2/start", "rd");
        assert_eq!(url, "https://$host/oauth2/start?rd=$pass_access_scheme://$http_host$escaped_request_uri");
        assert_eq!(
            signin_with_redirect("https://a/s?x=1", "rd"),
            "https://a/s?x=1&rd=$pass_access_scheme://$http_host$escaped_request_uri"
        );
        assert_eq!(signin_with_redirect("https://a/s?rd=/home", "rd"), "https://a/s?rd=/home");
        let mut out = Vec::new();
        expand(&url, &SigninRequest { tls: true, host: b"shop.test", target: b"/cart?id=7&x=a b" }, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "https://shop.test/oauth2/start?rd=https://shop.test%2Fcart%3Fid%3D7%26x%3Da%20b"
        );
    }
}
