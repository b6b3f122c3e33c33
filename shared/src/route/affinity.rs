//! Session affinity by cookie (ingress-nginx's `affinity: cookie` with its `session-cookie-*`
//! annotations): a client that comes back with the cookie is sent to the endpoint that served it
//! first, for as long as that endpoint is among the backend's; a client without it (or whose
//! endpoint is gone) is balanced as usual and answered with the cookie for the endpoint it got.
//!
//! The cookie's value names the endpoint by a hash of its address ([`endpoint_key`]): the same on
//! every replica and across restarts, and it says nothing about the address itself.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// ingress-nginx's cookie name when `session-cookie-name` is not given.
pub const AFFINITY_COOKIE: &str = "INGRESSCOOKIE";

/// How a route's sticky sessions are kept.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Affinity {
    /// `session-cookie-name`.
    pub cookie: Arc<str>,
    /// `session-cookie-path`, else the route's path (as ingress-nginx's `location_path`).
    pub path: Arc<str>,
    /// `session-cookie-domain`.
    pub domain: Option<Arc<str>>,
    /// `session-cookie-max-age` (or `session-cookie-expires`, sent as the same lifetime), seconds.
    pub max_age: Option<u64>,
    /// `session-cookie-secure`.
    pub secure: bool,
    /// `session-cookie-samesite`: `None`, `Lax` or `Strict`.
    pub same_site: Option<Arc<str>>,
}

impl Affinity {
    /// The `Set-Cookie` line naming `endpoint`, ending in CRLF.
    pub fn push_set_cookie(&self, endpoint: SocketAddr, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(out, "set-cookie: {}={:016x}; Path={}", self.cookie, endpoint_key(endpoint), self.path);
        if let Some(domain) = &self.domain {
            let _ = write!(out, "; Domain={domain}");
        }
        if let Some(age) = self.max_age {
            let _ = write!(out, "; Max-Age={age}");
        }
        if self.secure {
            out.extend_from_slice(b"; Secure");
        }
        if let Some(same_site) = &self.same_site {
            let _ = write!(out, "; SameSite={same_site}");
        }
        out.extend_from_slice(b"; HttpOnly\r\n");
    }

    /// The endpoint the cookie's `value` names, if it is one of `endpoints`.
    pub fn endpoint(value: &[u8], endpoints: &[SocketAddr]) -> Option<usize> {
        let text = std::str::from_utf8(value).ok()?;
        if text.len() != 16 {
            return None;
        }
        let key = u64::from_str_radix(text, 16).ok()?;
        endpoints.iter().position(|e| endpoint_key(*e) == key)
    }
}

impl fmt::Display for Affinity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sticky sessions by cookie {} (path {}", self.cookie, self.path)?;
        if let Some(d) = &self.domain {
            write!(f, ", domain {d}")?;
        }
        if let Some(age) = self.max_age {
            write!(f, ", max-age {age}")?;
        }
        if self.secure {
            f.write_str(", secure")?;
        }
        if let Some(s) = &self.same_site {
            write!(f, ", samesite {s}")?;
        }
        f.write_str(")")
    }
}

/// A stable name for an endpoint: FNV-1a over its address as text.
pub fn endpoint_key(endpoint: SocketAddr) -> u64 {
    use std::io::Write;
    let mut text = [0u8; 64];
    let mut cursor = std::io::Cursor::new(&mut text[..]);
    let _ = write!(cursor, "{endpoint}");
    let len = cursor.position() as usize;
    text[..len].iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_names_its_endpoint_and_nothing_else() {
        let endpoints: Vec<SocketAddr> = vec!["10.0.0.1:80".parse().unwrap(), "10.0.0.2:80".parse().unwrap()];
        let affinity = Affinity {
            cookie: AFFINITY_COOKIE.into(),
            path: "/".into(),
            domain: None,
            max_age: Some(3600),
            secure: true,
            same_site: Some("Lax".into()),
        };
        let mut line = Vec::new();
        affinity.push_set_cookie(endpoints[1], &mut line);
        let text = String::from_utf8(line).unwrap();
        let value = text.strip_prefix("set-cookie: INGRESSCOOKIE=").unwrap().split(';').next().unwrap();
        assert_eq!(Affinity::endpoint(value.as_bytes(), &endpoints), Some(1));
        assert!(text.ends_with("; Path=/; Max-Age=3600; Secure; SameSite=Lax; HttpOnly\r\n"), "{text}");
        assert_eq!(Affinity::endpoint(b"0000000000000000", &endpoints), None);
        assert_eq!(Affinity::endpoint(b"garbage", &endpoints), None);
        // Stable: the same address, the same key, whatever process computes it.
        assert_eq!(endpoint_key("10.0.0.1:80".parse().unwrap()), endpoint_key(endpoints[0]));
        assert_ne!(endpoint_key(endpoints[0]), endpoint_key(endpoints[1]));
    }
}
