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
    /// `session-cookie-max-age`, seconds: the cookie's `Max-Age`.
    pub max_age: Option<u64>,
    /// `session-cookie-expires`, seconds from the answer: the cookie's `Expires` date.
    pub expires: Option<u64>,
    /// `session-cookie-secure`: `Secure` over plain HTTP too (over HTTPS it always is, as in
    /// ingress-nginx).
    pub secure: bool,
    /// `session-cookie-samesite`: `None`, `Lax` or `Strict`.
    pub same_site: Option<Arc<str>>,
}

impl Affinity {
    /// The `Set-Cookie` line naming `endpoint`, ending in CRLF, for an answer over HTTPS or not
    /// (`https`), sent at `now` (seconds since the epoch, for `Expires`).
    pub fn push_set_cookie(&self, endpoint: SocketAddr, https: bool, now: u64, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(out, "set-cookie: {}={:016x}; Path={}", self.cookie, endpoint_key(endpoint), self.path);
        if let Some(domain) = &self.domain {
            let _ = write!(out, "; Domain={domain}");
        }
        if let Some(expires) = self.expires {
            out.extend_from_slice(b"; Expires=");
            push_cookie_time(now.saturating_add(expires), out);
        }
        if let Some(age) = self.max_age {
            let _ = write!(out, "; Max-Age={age}");
        }
        if self.secure || https {
            out.extend_from_slice(b"; Secure");
        }
        if let Some(same_site) = &self.same_site {
            let _ = write!(out, "; SameSite={same_site}");
        }
        out.extend_from_slice(b"; HttpOnly\r\n");
    }

    /// The endpoint the cookie's `value` names, if it is one of `endpoints`.
    pub fn endpoint(value: &[u8], endpoints: &[SocketAddr]) -> Option<usize> {
        let key = cookie_key(value)?;
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
        if let Some(expires) = self.expires {
            write!(f, ", expires in {expires}s")?;
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

/// A date as nginx writes a cookie's `Expires` (`ngx_http_cookie_time`): `Thu, 18-Nov-10
/// 11:27:35 GMT`, the year in two digits up to 2037 and in four after.
pub fn push_cookie_time(unix: u64, out: &mut Vec<u8>) {
    use std::io::Write;
    let days = unix / 86_400;
    let (hour, minute, second) = ((unix % 86_400) / 3600, (unix % 3600) / 60, unix % 60);
    let (year, month, day) = crate::date::civil(days);
    let (weekday, name) = (crate::date::weekday(days), crate::date::month_name(month));
    let _ = if year > 2037 {
        write!(out, "{weekday}, {day:02}-{name}-{year} {hour:02}:{minute:02}:{second:02} GMT")
    } else {
        write!(out, "{weekday}, {day:02}-{name}-{:02} {hour:02}:{minute:02}:{second:02} GMT", year % 100)
    };
}

/// The endpoint key a cookie's value carries, if it is one (16 hex digits).
pub fn cookie_key(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    if text.len() != 16 {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
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
            expires: None,
            secure: true,
            same_site: Some("Lax".into()),
        };
        let mut line = Vec::new();
        affinity.push_set_cookie(endpoints[1], false, 0, &mut line);
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

    #[test]
    fn expires_is_a_date_as_nginx_writes_it_and_https_is_always_secure() {
        let date = |unix: u64| {
            let mut out = Vec::new();
            push_cookie_time(unix, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(date(0), "Thu, 01-Jan-70 00:00:00 GMT");
        assert_eq!(date(1_290_079_655), "Thu, 18-Nov-10 11:27:35 GMT");
        assert_eq!(date(951_782_400), "Tue, 29-Feb-00 00:00:00 GMT");
        assert_eq!(date(2_114_380_800), "Thu, 01-Jan-37 00:00:00 GMT");
        assert_eq!(date(2_145_916_800), "Fri, 01-Jan-2038 00:00:00 GMT");
        assert_eq!(date(2_177_452_800), "Sat, 01-Jan-2039 00:00:00 GMT");
        let affinity = Affinity {
            cookie: "SERVERID".into(),
            path: "/".into(),
            domain: None,
            max_age: Some(259_200),
            expires: Some(172_800),
            secure: false,
            same_site: None,
        };
        let mut line = Vec::new();
        affinity.push_set_cookie("10.0.0.1:80".parse().unwrap(), true, 1_290_079_655, &mut line);
        let text = String::from_utf8(line).unwrap();
        assert!(
            text.ends_with("; Path=/; Expires=Sat, 20-Nov-10 11:27:35 GMT; Max-Age=259200; Secure; HttpOnly\r\n"),
            "{text}"
        );
    }
}
