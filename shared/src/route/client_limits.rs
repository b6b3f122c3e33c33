//! Per-client limits of a route, as ingress-nginx's `limit-rps`, `limit-rpm` and
//! `limit-connections` annotations set them: what the compiler decides; the data plane keeps the
//! counts (`dataplane/src/limits.rs`).

use std::fmt;

use super::source_ranges::IpBlock;

/// A request rate and the burst allowed above it, as nginx's `limit_req` takes them
/// (`rate=Nr/s` or `rate=Nr/m`, `burst=B nodelay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Rate {
    /// Requests per second, or per minute when `per_minute`.
    pub requests: u64,
    pub per_minute: bool,
    /// Requests a client may be ahead of the rate before it is refused.
    pub burst: u64,
}

impl Rate {
    /// The rate in thousandths of a request per second, as nginx keeps it (a per-minute rate is
    /// divided by 60, rounding down).
    pub fn milli_per_second(&self) -> u64 {
        if self.per_minute {
            self.requests * 1000 / 60
        } else {
            self.requests * 1000
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = if self.per_minute { "m" } else { "s" };
        write!(f, "{} r/{unit} (burst {})", self.requests, self.burst)
    }
}

/// What one Ingress limits per client address. All routes of the Ingress share its `zone`, so a
/// client's requests to any of its paths count together, as in ingress-nginx (one zone per
/// Ingress).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClientLimits {
    /// The Ingress's zone: the same number for the same Ingress in every generation (a hash of its
    /// namespace, name and uid), so counts survive a configuration change.
    pub zone: u64,
    /// `limit-rps`.
    pub per_second: Option<Rate>,
    /// `limit-rpm`.
    pub per_minute: Option<Rate>,
    /// `limit-connections`: requests of one client under way at once.
    pub concurrent: Option<u32>,
    /// `limit-allowlist` / `limit-whitelist`: client addresses none of the limits apply to.
    pub exempt: Box<[IpBlock]>,
}

impl fmt::Display for ClientLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for rate in [self.per_second, self.per_minute].into_iter().flatten() {
            parts.push(rate.to_string());
        }
        if let Some(n) = self.concurrent {
            parts.push(format!("{n} at once"));
        }
        write!(f, "per client {}", parts.join(", "))
    }
}
