//! When a request is passed to the next endpoint (ingress-nginx's `proxy-next-upstream`,
//! `proxy-next-upstream-tries` and `proxy-next-upstream-timeout`, nginx's directives of the same
//! names): after an error, a timeout, an invalid response head or one of a list of statuses,
//! before anything has been sent to the client.
//!
//! As in nginx, a request whose method is not idempotent (POST, LOCK, PATCH) is passed on only if
//! it was not sent yet (a refused connection), unless `non_idempotent` is given; each endpoint is
//! tried at most once; after the last try its answer (or its error) is the client's.

use std::fmt;
use std::time::Duration;

/// The statuses `http_<code>` may name, in bit order.
const STATUSES: [u16; 7] = [500, 502, 503, 504, 403, 404, 429];

/// A route's rule for passing requests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct NextUpstream {
    /// An error connecting, sending the request or reading the response head.
    pub error: bool,
    pub timeout: bool,
    /// An empty or invalid response head.
    pub invalid_header: bool,
    /// `http_<code>` for each bit of [`STATUSES`].
    statuses: u8,
    pub non_idempotent: bool,
    /// Tries in all, the first included; 0: as many as there are endpoints.
    pub tries: u32,
    /// No new try after this long since the first began; `None`: no limit.
    pub within: Option<Duration>,
}

impl NextUpstream {
    /// nginx's default, `error timeout` (ingress-nginx's too), with ingress-nginx's 3 tries.
    pub const DEFAULT: NextUpstream = NextUpstream {
        error: true,
        timeout: true,
        invalid_header: false,
        statuses: 0,
        non_idempotent: false,
        tries: 3,
        within: None,
    };

    /// Parses `proxy-next-upstream`'s list (`error timeout http_502`, `off`), with the tries and
    /// the timeout given beside it.
    pub fn parse(list: &str, tries: u32, within: Option<Duration>) -> Result<Self, String> {
        let mut next = NextUpstream { error: false, timeout: false, tries, within, ..NextUpstream::DEFAULT };
        let words: Vec<&str> = list.split_whitespace().collect();
        if words.is_empty() {
            return Err("an empty list (use \"off\" to never pass a request on)".into());
        }
        for word in &words {
            match *word {
                "error" => next.error = true,
                "timeout" => next.timeout = true,
                "invalid_header" => next.invalid_header = true,
                "non_idempotent" => next.non_idempotent = true,
                "off" if words.len() == 1 => {}
                "off" => return Err("\"off\" cannot be combined with other conditions".into()),
                other => {
                    let code = other.strip_prefix("http_").and_then(|c| c.parse::<u16>().ok());
                    match code.and_then(|c| STATUSES.iter().position(|&s| s == c)) {
                        Some(bit) => next.statuses |= 1 << bit,
                        None => {
                            return Err(format!(
                                "`{other}` is not one of error, timeout, invalid_header, http_500, http_502, \
                                 http_503, http_504, http_403, http_404, http_429, non_idempotent, off"
                            ))
                        }
                    }
                }
            }
        }
        Ok(next)
    }

    /// Whether an answer with this status is passed on.
    #[inline]
    pub fn on_status(&self, status: u16) -> bool {
        self.statuses != 0
            && STATUSES.iter().position(|&s| s == status).is_some_and(|bit| self.statuses & (1 << bit) != 0)
    }

    /// Whether it ever passes a request on.
    pub fn is_off(&self) -> bool {
        !(self.error || self.timeout || self.invalid_header || self.statuses != 0)
    }
}

impl fmt::Display for NextUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_off() {
            return f.write_str("never to the next endpoint");
        }
        f.write_str("to the next endpoint on")?;
        for (on, name) in [(self.error, "error"), (self.timeout, "timeout"), (self.invalid_header, "invalid_header")] {
            if on {
                write!(f, " {name}")?;
            }
        }
        for (bit, code) in STATUSES.iter().enumerate() {
            if self.statuses & (1 << bit) != 0 {
                write!(f, " http_{code}")?;
            }
        }
        if self.non_idempotent {
            f.write_str(" non_idempotent")?;
        }
        match self.tries {
            0 => f.write_str(", every endpoint once")?,
            n => write!(f, ", {n} tries")?,
        }
        if let Some(d) = self.within {
            write!(f, " within {}s", d.as_secs())?;
        }
        Ok(())
    }
}

/// Methods nginx does not pass on once sent (`ngx_http_upstream_non_idempotent`).
pub fn is_idempotent(method: &[u8]) -> bool {
    !matches!(method, b"POST" | b"LOCK" | b"PATCH")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_as_nginx_reads_them() {
        let n = NextUpstream::parse("error timeout http_502 http_429 non_idempotent", 2, None).unwrap();
        assert!(n.error && n.timeout && !n.invalid_header && n.non_idempotent);
        assert!(n.on_status(502) && n.on_status(429) && !n.on_status(503) && !n.on_status(200));
        assert_eq!(n.to_string(), "to the next endpoint on error timeout http_502 http_429 non_idempotent, 2 tries");
        let off = NextUpstream::parse("off", 3, None).unwrap();
        assert!(off.is_off() && !off.on_status(502));
        assert!(NextUpstream::parse("off error", 3, None).is_err());
        assert!(NextUpstream::parse("http_418", 3, None).is_err());
        assert!(NextUpstream::parse("  ", 3, None).is_err());
        assert!(is_idempotent(b"GET") && is_idempotent(b"PUT") && !is_idempotent(b"POST") && !is_idempotent(b"PATCH"));
    }
}
