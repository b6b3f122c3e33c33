//! What the admin API answers, as `ramjet-top` reads it.
//!
//! The structs accept unknown fields on purpose: an operator's `ramjet-top` may be older than the
//! daemon it watches, and a new field in the daemon's answer must not blind it.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `GET /admin/generations`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Generations {
    /// The generation that serves traffic now.
    pub serving: u64,
    /// The generation an operator pinned, if any; newer ones are recorded but held back.
    pub pinned: Option<u64>,
    /// The last generation compiled.
    pub newest: u64,
    /// How many generations the daemon keeps for rollback.
    pub history_size: usize,
    /// The history ring, newest first.
    pub generations: Vec<GenerationInfo>,
}

/// One entry of the history ring.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GenerationInfo {
    pub generation: u64,
    /// Short digest of the compiled table.
    pub digest: String,
    /// RFC 3339 (UTC).
    pub compiled_at: String,
    /// RFC 3339 (UTC): when the applier took it.
    pub applied_at: String,
    /// Put on the wire when applied (false: held back by a pin).
    pub published: bool,
    pub serving: bool,
    pub routes: usize,
    pub hosts: usize,
    pub certs: usize,
    /// The diff against the previous generation, as a sentence.
    pub summary: String,
    #[serde(default)]
    pub diagnostics: Vec<Diagnostic>,
}

/// A problem the compiler reported for a generation: the daemon's own type.
pub use ramjet_shared::Diagnostic;

/// The answer to `POST` and `DELETE /admin/rollback`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PinAnswer {
    pub serving: u64,
    pub pinned: Option<u64>,
    pub newest: u64,
    /// The daemon's own sentence about what it did.
    pub message: String,
}

/// The series of `GET /metrics` that `ramjet-top` shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// `ramjet_requests_total`, by status class (`2xx`, ...).
    pub requests: BTreeMap<String, f64>,
    /// `ramjet_upstream_errors_total`, by kind (`connect`, ...).
    pub upstream_errors: BTreeMap<String, f64>,
    /// `ramjet_connections_active`.
    pub connections_active: Option<f64>,
}

impl Scrape {
    /// Reads the Prometheus text format, keeping the series above and skipping everything else
    /// (comments, other families, lines it cannot read).
    pub fn parse(text: &str) -> Scrape {
        let mut scrape = Scrape::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((series, value)) = line.rsplit_once(char::is_whitespace) else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name.trim(), rest.trim_end().trim_end_matches('}')),
                None => (series.trim(), ""),
            };
            match name {
                "ramjet_requests_total" => {
                    if let Some(class) = label(labels, "class") {
                        scrape.requests.insert(class.to_string(), value);
                    }
                }
                "ramjet_upstream_errors_total" => {
                    if let Some(kind) = label(labels, "kind") {
                        scrape.upstream_errors.insert(kind.to_string(), value);
                    }
                }
                "ramjet_connections_active" => scrape.connections_active = Some(value),
                _ => {}
            }
        }
        scrape
    }

    pub fn requests_total(&self) -> f64 {
        self.requests.values().sum()
    }

    pub fn upstream_errors_total(&self) -> f64 {
        self.upstream_errors.values().sum()
    }
}

/// The value of `key` in a label set like `class="2xx",le="1"` (our labels hold no commas or
/// escaped quotes).
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}
