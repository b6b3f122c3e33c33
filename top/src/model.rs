//! What the admin API answers, as `ramjet-top` reads it: the JSON answers are the daemon's own
//! types from [`ramjet_shared::admin`] (one schema for both, tolerant of other versions: unknown
//! fields are ignored, later fields default), and the few `/metrics` series shown are read here.

use std::collections::BTreeMap;

pub use ramjet_shared::admin::{GenerationInfo, Generations, PinAnswer, PinState, RouteTraffic, Traffic};
pub use ramjet_shared::Diagnostic;

/// The series of `GET /metrics` that `ramjet-top` shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// `ramjet_requests_total`, by status class (`2xx`, ...).
    pub requests: BTreeMap<String, f64>,
    /// `ramjet_upstream_errors_total`, by kind (`connect`, ...).
    pub upstream_errors: BTreeMap<String, f64>,
    /// `ramjet_connections_active`.
    pub connections_active: Option<f64>,
    /// `GET /admin/traffic`, asked for with each scrape (`None` from a daemon without it).
    pub routes: Option<Traffic>,
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
