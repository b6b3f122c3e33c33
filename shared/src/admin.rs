//! The admin API's wire schema: what the daemon's admin listener writes and `ramjet-top` (or any
//! other client) reads. Declared once, here, so the two cannot drift apart.
//!
//! Readers are tolerant on purpose: unknown fields are ignored and fields added after the first
//! release default when absent, so an operator's `ramjet-top` may be older or newer than the daemon
//! it watches. The daemon refuses unknown fields in what it reads ([`RollbackRequest`]).
//!
//! | request | answer |
//! |---|---|
//! | `GET /admin/generations` | [`Generations`] |
//! | `POST /admin/rollback` [`RollbackRequest`] | [`PinAnswer`] |
//! | `DELETE /admin/rollback` | [`PinAnswer`] |
//! | `GET /admin/traffic` | [`Traffic`] |
//! | `GET /admin/route?host=H&path=P[&tls=true]` | [`RouteAnswer`] |
//! | any error | [`ErrorBody`] |

use serde::{Deserialize, Serialize};

use crate::generation::Diagnostic;

/// `GET /admin/route`: what the generation serving now does with a request for `host` and `path`
/// (over TLS or not), before any rule of the route looks at the request's headers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteAnswer {
    pub generation: u64,
    /// The host as routing sees it (lowercase, without port or trailing dot).
    pub host: String,
    pub path: String,
    /// `route`, `https_redirect` (a plain request, answered 308) or `no_route` (404).
    pub answer: String,
    /// The route that serves it, when `answer` is `route`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteServing>,
}

/// The route a request reaches, and the backend that answers when no rule of it picks another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteServing {
    /// The object that declared it (`namespace/ingress`, `static-routes[3]`).
    pub source: String,
    pub backend: String,
    /// Its endpoints now (empty: 503), or none for a backend that answers directly.
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// The status of a backend that answers directly (`respond:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responds: Option<u16>,
    /// Rules of its policy (canaries, header or cookie conditions) that may send the request
    /// elsewhere: what they decide depends on the request.
    #[serde(default)]
    pub rules: usize,
}

/// `GET /admin/generations`: the history ring, newest first, with what serves and what is pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generations {
    /// The generation that serves traffic now.
    pub serving: u64,
    /// The generation an operator pinned, if any; newer ones are recorded but not published.
    pub pinned: Option<u64>,
    /// The last generation compiled.
    pub newest: u64,
    /// How many generations the daemon keeps for rollback (`--history-size`).
    pub history_size: usize,
    /// The history ring, newest first.
    pub generations: Vec<GenerationInfo>,
}

/// One entry of the history ring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerationInfo {
    pub generation: u64,
    /// The first 12 hex digits of the compiled table's digest.
    pub digest: String,
    /// RFC 3339 (UTC), milliseconds.
    pub compiled_at: String,
    /// RFC 3339 (UTC): when the applier took it.
    pub applied_at: String,
    /// Whether it has been published: at apply time, or later by a rollback or a release. A
    /// generation compiled while pinned is `false` until then.
    pub published: bool,
    /// Whether it is the one serving now.
    pub serving: bool,
    pub routes: usize,
    pub hosts: usize,
    pub certs: usize,
    /// The diff against the generation compiled before it, as a sentence.
    pub summary: String,
    /// The same diff, counted.
    #[serde(default)]
    pub changes: DiffCounts,
    /// What did not compile, and why.
    #[serde(default)]
    pub diagnostics: Vec<Diagnostic>,
}

/// Counts of a diff between two compiled tables, as the admin API, the audit log line and the
/// audit webhook carry them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiffCounts {
    pub routes_added: usize,
    pub routes_removed: usize,
    /// Routes whose backend, endpoints or direct response changed.
    pub backends_changed: usize,
    pub hosts_added: usize,
    pub hosts_removed: usize,
    pub certs_added: usize,
    pub certs_removed: usize,
    pub certs_rotated: usize,
    pub https_redirects_added: usize,
    pub https_redirects_removed: usize,
    pub mirrors_added: usize,
    pub mirrors_removed: usize,
    /// Server names whose TLS passthrough started, moved to another backend, or stopped.
    pub passthrough_changed: usize,
    /// Hosts whose client-certificate authentication started, changed or stopped.
    pub client_auth_changed: usize,
    /// Settings of the whole table that changed (`Strict-Transport-Security`).
    pub settings_changed: usize,
    /// Ports whose TCP or UDP route started, changed or stopped.
    pub port_routes_changed: usize,
    pub default_backend_changed: bool,
}

/// The body of `POST /admin/rollback`: exactly one of `generation` (this replica's number) or
/// `digest` (a prefix of the compiled table's digest, the same on every replica that compiled the
/// same cluster state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// The shortest digest prefix `POST /admin/rollback` accepts, in hex digits. `GET /admin/generations`
/// shows 12; any prefix from 8 to 64 digits names a generation.
pub const MIN_DIGEST_PREFIX: usize = 8;

/// What a rollback asks for, once the request is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackTarget {
    Generation(u64),
    /// A lowercase hex prefix of [`MIN_DIGEST_PREFIX`] to 64 digits.
    Digest(String),
}

impl RollbackRequest {
    pub fn generation(n: u64) -> Self {
        RollbackRequest { generation: Some(n), digest: None }
    }

    pub fn digest(prefix: &str) -> Self {
        RollbackRequest { generation: None, digest: Some(prefix.to_string()) }
    }

    /// The target, or why the request names none (or two).
    pub fn target(&self) -> Result<RollbackTarget, String> {
        match (self.generation, &self.digest) {
            (Some(n), None) => Ok(RollbackTarget::Generation(n)),
            (None, Some(d)) => {
                let d = d.trim().to_ascii_lowercase();
                if !(MIN_DIGEST_PREFIX..=64).contains(&d.len()) || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!(
                        "\"digest\" must be {MIN_DIGEST_PREFIX} to 64 hex digits of a digest shown by GET /admin/generations, not {d:?}"
                    ));
                }
                Ok(RollbackTarget::Digest(d))
            }
            (Some(_), Some(_)) => Err("give either \"generation\" or \"digest\", not both".into()),
            (None, None) => Err("give {\"generation\": N} or {\"digest\": \"<hex prefix>\"}".into()),
        }
    }
}

/// What serves, what is pinned and what is newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinState {
    pub serving: u64,
    pub pinned: Option<u64>,
    pub newest: u64,
}

/// The answer to `POST` and `DELETE /admin/rollback`: the pin state after it, and the daemon's own
/// sentence about what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinAnswer {
    #[serde(flatten)]
    pub state: PinState,
    pub message: String,
}

/// Every error the admin API answers: a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader older or newer than the daemon: unknown fields are ignored, later fields default.
    #[test]
    fn readers_tolerate_other_versions() {
        let text = r#"{"generation":1,"digest":"a1","compiled_at":"t","applied_at":"t","published":true,
            "serving":true,"routes":1,"hosts":1,"certs":0,"summary":"1 route added",
            "changes":{"routes_added":1,"a_count_from_a_newer_daemon":3},"a_field_from_a_newer_daemon":true}"#;
        let info: GenerationInfo = serde_json::from_str(text).unwrap();
        assert_eq!(info.changes, DiffCounts { routes_added: 1, ..DiffCounts::default() });
        assert!(info.diagnostics.is_empty());
        let answer: PinAnswer =
            serde_json::from_str(r#"{"serving":3,"pinned":3,"newest":4,"message":"pinned"}"#).unwrap();
        assert_eq!(answer.state, PinState { serving: 3, pinned: Some(3), newest: 4 });
        assert!(serde_json::from_str::<RollbackRequest>(r#"{"generation":1,"force":true}"#).is_err());
    }
}

/// `GET /admin/traffic`: the per route and backend counters behind `/metrics`, summed over the
/// workers, cumulative since start. A client takes two and divides the difference by the time
/// between them for rates, error ratios and windowed percentiles (`ramjet-top` does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// This process's random id, new at every start: tells replicas behind one name apart, and a
    /// restarted replica from the one before it (empty from a ramjet that predates it).
    #[serde(default)]
    pub instance: String,
    /// Upper bounds (seconds) of the duration buckets; each route's `duration_buckets` has one
    /// more entry, for what lies above the last bound.
    pub bounds: Vec<f64>,
    /// Sorted by route, then backend.
    pub routes: Vec<RouteTraffic>,
}

/// One (route, backend) pair's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteTraffic {
    /// `namespace/ingress`, or the static route (`routes[N]`, `defaultBackend`).
    pub route: String,
    pub backend: String,
    /// Requests answered.
    pub requests: u64,
    /// Of which with a 4xx status.
    pub client_errors: u64,
    /// Of which with a 5xx status.
    pub server_errors: u64,
    /// Request durations per bucket (not cumulative), as [`Traffic::bounds`] says.
    pub duration_buckets: Vec<u64>,
    /// Sum of request durations, microseconds.
    pub duration_sum_us: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub upstream_connect_errors: u64,
}

impl RouteTraffic {
    /// The upper bound (seconds) of the bucket holding quantile `q` of the requests counted by
    /// `buckets` (a difference of two snapshots, or a snapshot); `None` without requests and
    /// `f64::INFINITY` above the last bound.
    pub fn quantile_bound(bounds: &[f64], buckets: &[u64], q: f64) -> Option<f64> {
        let count: u64 = buckets.iter().sum();
        if count == 0 {
            return None;
        }
        let rank = ((q * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bounds.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        Some(f64::INFINITY)
    }
}
