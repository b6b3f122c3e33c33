//! Canary auto-promotion, the pure part: the settings a canary Ingress or an HTTPRoute asks for
//! (`ramjet.dev/canary-auto-promote` and Flagger's vocabulary), the state ramjet keeps in the
//! `ramjet.dev/canary-state` annotation on that object, the figures of one window, and the
//! decision they make. Both kinds share all of it: only what the canary is (a canary Ingress's
//! backends; an HTTPRoute rule's second backendRef) is the compilers' business.
//!
//! ```text
//!  (no state) ──start──▶ Progressing weight=step ──check passes──▶ weight += step (≤ max)
//!                             │    ▲                                   │ at max, passes
//!                             │    └── check fails: failures += 1      ▼
//!                             └── failures = threshold ──▶ Aborted (0)   Promoted (weight = total)
//! ```
//!
//! The I/O — who decides (the Lease holder), reading the data plane's counters, writing the
//! annotation and the Events — is `crate::cluster::promote`. `docs/canaries.md` describes it for
//! users.

use std::collections::BTreeMap;
use std::time::Duration;

use ramjet_shared::admin::Traffic;
use ramjet_shared::{HistogramSnapshot, RouteSnapshot, StatusClass, DURATION_BUCKETS};
use serde::{Deserialize, Serialize};

/// The annotation ramjet owns on a canary Ingress: where promotion is.
pub const STATE_ANNOTATION: &str = "ramjet.dev/canary-state";
/// ramjet's own annotations for auto-promotion (ingress-nginx has none).
const PREFIX: &str = "ramjet.dev/";
/// The settings [`AutoPromote::from_annotations`] reads, under [`PREFIX`].
pub const SETTINGS: [&str; 8] = [
    "canary-auto-promote",
    "canary-step-weight",
    "canary-max-weight",
    "canary-interval",
    "canary-min-requests",
    "canary-min-success-rate",
    "canary-max-p99",
    "canary-failure-threshold",
];

/// What a canary asks of auto-promotion. Weights are out of the canary's weight total (100 by
/// default, so percent).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoPromote {
    /// `canary-step-weight`: added at each passing check (default 10).
    pub step_weight: u32,
    /// `canary-max-weight`: the last step; a check that passes there promotes (default 50).
    pub max_weight: u32,
    /// `canary-interval`: how long each window is (default 1m).
    pub interval: Duration,
    /// `canary-min-requests`: requests the canary must have served in a window (default 100).
    pub min_requests: u64,
    /// `canary-min-success-rate`: percent of the window's requests that were not 5xx (default 99).
    pub min_success_rate: f64,
    /// `canary-max-p99`: the window's 99th percentile request duration (default 500ms).
    pub max_p99: Duration,
    /// `canary-failure-threshold`: failed checks, in all, that abort (default 5).
    pub failure_threshold: u32,
}

impl Default for AutoPromote {
    fn default() -> Self {
        AutoPromote {
            step_weight: 10,
            max_weight: 50,
            interval: Duration::from_secs(60),
            min_requests: 100,
            min_success_rate: 99.0,
            max_p99: Duration::from_millis(500),
            failure_threshold: 5,
        }
    }
}

impl AutoPromote {
    /// The settings of a canary Ingress or an HTTPRoute that opts in
    /// (`ramjet.dev/canary-auto-promote: "true"`), `None` when it does not. A value that cannot be used is pushed to `problems` and turns promotion
    /// off for this canary (`None`): it then serves its `canary-weight` as written.
    pub fn from_annotations(
        map: Option<&BTreeMap<String, String>>,
        total: u32,
        problems: &mut Vec<String>,
    ) -> Option<Self> {
        let map = map?;
        let get = |name: &str| map.get(&format!("{PREFIX}{name}")).map(|v| v.trim());
        match get("canary-auto-promote") {
            None | Some("false") => return None,
            Some("true") => {}
            Some(other) => {
                problems.push(format!("{PREFIX}canary-auto-promote: `{other}` is not \"true\" or \"false\"; the canary is not auto-promoted"));
                return None;
            }
        }
        let mut settings = AutoPromote::default();
        let before = problems.len();
        let mut bad = |name: &str, value: &str, want: &str| {
            problems.push(format!("{PREFIX}{name}: `{value}` is not {want}; the canary is not auto-promoted"));
        };
        let whole = |name: &str, min: u64, max: u64, bad: &mut dyn FnMut(&str, &str, &str)| -> Option<u64> {
            let v = get(name)?;
            match v.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Some(n),
                _ => {
                    bad(name, v, &format!("a whole number from {min} to {max}"));
                    None
                }
            }
        };
        if let Some(n) = whole("canary-step-weight", 1, total as u64, &mut bad) {
            settings.step_weight = n as u32;
        }
        if let Some(n) = whole("canary-max-weight", 1, total as u64, &mut bad) {
            settings.max_weight = n as u32;
        }
        if let Some(n) = whole("canary-min-requests", 0, u32::MAX as u64, &mut bad) {
            settings.min_requests = n;
        }
        if let Some(n) = whole("canary-failure-threshold", 1, 1000, &mut bad) {
            settings.failure_threshold = n as u32;
        }
        let duration = |name: &str, bad: &mut dyn FnMut(&str, &str, &str)| -> Option<Duration> {
            let v = get(name)?;
            match humantime::parse_duration(v) {
                Ok(d) if !d.is_zero() => Some(d),
                _ => {
                    bad(name, v, "a duration such as 30s, 1m or 500ms");
                    None
                }
            }
        };
        if let Some(d) = duration("canary-interval", &mut bad) {
            settings.interval = d;
        }
        if let Some(d) = duration("canary-max-p99", &mut bad) {
            settings.max_p99 = d;
        }
        if let Some(v) = get("canary-min-success-rate") {
            match v.trim_end_matches('%').parse::<f64>() {
                Ok(r) if (0.0..=100.0).contains(&r) => settings.min_success_rate = r,
                _ => bad("canary-min-success-rate", v, "a percentage from 0 to 100"),
            }
        }
        if problems.len() > before {
            return None;
        }
        settings.max_weight = settings.max_weight.min(total);
        Some(settings)
    }

    /// The figures pass the checks, or why they do not.
    pub fn check(&self, figures: &Figures) -> Result<(), String> {
        if figures.requests < self.min_requests.max(1) {
            return Err(format!("{} requests, fewer than the {} needed", figures.requests, self.min_requests.max(1)));
        }
        if figures.success_rate < self.min_success_rate {
            return Err(format!("success rate {:.2}% is below {}%", figures.success_rate, self.min_success_rate));
        }
        if figures.p99 > self.max_p99 {
            return Err(format!("p99 {} is above {}", ms(figures.p99), ms(self.max_p99)));
        }
        Ok(())
    }
}

/// Where promotion of a canary stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Progressing,
    Promoted,
    Aborted,
}

/// The kind of object that carries a canary's annotations (and gets its state and Events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CanaryKind {
    /// A canary Ingress (`canary: "true"`) attached to a primary Ingress's routes.
    Ingress,
    /// An HTTPRoute whose rules with exactly two `backendRefs` split between the first (the
    /// primary) and the second (the canary).
    HttpRoute,
}

impl CanaryKind {
    /// The Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        match self {
            CanaryKind::Ingress => "Ingress",
            CanaryKind::HttpRoute => "HTTPRoute",
        }
    }

    /// What the user does once the canary is promoted: ramjet never edits what they declared.
    fn after_promotion(self) -> &'static str {
        match self {
            CanaryKind::Ingress => "Make the primary Ingress's backend match the canary, then delete the canary Ingress",
            CanaryKind::HttpRoute => {
                "Make the canary the only backendRef of the HTTPRoute's rules, then remove the ramjet.dev/canary-* annotations (the state too)"
            }
        }
    }
}

/// A canary that auto-promotes (a canary Ingress, or an HTTPRoute), as the last compile saw it:
/// what the deciding replica needs to judge it.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryPlan {
    pub kind: CanaryKind,
    pub namespace: String,
    pub name: String,
    pub settings: AutoPromote,
    /// The weight total the weights are out of.
    pub total: u32,
    /// The canary's backends, sorted and joined with `,` (what a state is about).
    pub backend: String,
    /// The (route, backend) series that count the canary's requests.
    pub series: Vec<(String, String)>,
}

/// What `ramjet.dev/canary-state` holds (compact JSON, in this field order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CanaryState {
    pub phase: Phase,
    /// The canary's weight now, out of the weight total.
    pub weight: u32,
    /// Steps taken (1 once started).
    pub step: u32,
    /// Failed checks so far.
    pub failures: u32,
    /// The last decision: `started`, `stepped`, `check-failed`, `promoted`, `aborted`.
    pub last: String,
    /// When it was made (RFC 3339, seconds).
    pub at: String,
    /// The canary's backends the state is about: another backend (a new version) starts over.
    pub backend: String,
}

impl CanaryState {
    /// Reads the annotation's value; `None` when it is not a state ramjet wrote.
    pub fn parse(value: &str) -> Option<Self> {
        serde_json::from_str(value).ok()
    }

    pub fn render(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The weight every replica serves for a canary in this state.
    pub fn served_weight(&self, total: u32) -> u32 {
        match self.phase {
            Phase::Progressing => self.weight.min(total),
            Phase::Promoted => total,
            Phase::Aborted => 0,
        }
    }
}

/// The counters of a canary's backend, summed over its series, at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub requests: u64,
    pub failures: u64,
    pub duration: HistogramSnapshot,
}

impl Totals {
    /// Sums the series named by `series` ((route, backend) pairs) in `snapshot`.
    pub fn of(snapshot: &[RouteSnapshot], series: &[(String, String)]) -> Totals {
        let mut t = Totals::default();
        for s in snapshot {
            if !series.iter().any(|(r, b)| **r == *s.route && **b == *s.backend) {
                continue;
            }
            t.add(s.requests.iter().sum(), s.requests[StatusClass::ServerError as usize], &s.duration.buckets);
            t.duration.sum_us += s.duration.sum_us;
        }
        t
    }

    /// The same sum over another replica's counters, as its admin API reported them; `None` when
    /// its histogram has other buckets than this build's (another version of ramjet).
    pub fn of_traffic(traffic: &Traffic, series: &[(String, String)]) -> Option<Totals> {
        if traffic.bounds != DURATION_BUCKETS {
            return None;
        }
        let mut t = Totals::default();
        for s in &traffic.routes {
            if !series.iter().any(|(r, b)| *r == s.route && *b == s.backend) {
                continue;
            }
            if s.duration_buckets.len() != DURATION_BUCKETS.len() + 1 {
                return None;
            }
            t.add(s.requests, s.server_errors, &s.duration_buckets);
            t.duration.sum_us += s.duration_sum_us;
        }
        Some(t)
    }

    fn add(&mut self, requests: u64, failures: u64, buckets: &[u64]) {
        self.requests += requests;
        self.failures += failures;
        for (total, n) in self.duration.buckets.iter_mut().zip(buckets) {
            *total += n;
        }
    }

    /// What happened between `earlier` and `self` (a counter that went down — a series dropped
    /// and recreated — counts as no change).
    pub fn delta(&self, earlier: &Totals) -> Totals {
        let mut d = Totals {
            requests: self.requests.saturating_sub(earlier.requests),
            failures: self.failures.saturating_sub(earlier.failures),
            ..Totals::default()
        };
        d.failures = d.failures.min(d.requests);
        for (i, b) in d.duration.buckets.iter_mut().enumerate() {
            *b = self.duration.buckets[i].saturating_sub(earlier.duration.buckets[i]);
        }
        d
    }

    /// The figures of a window whose counts these are (a [`Totals::delta`]).
    pub fn figures(&self, replicas: usize) -> Figures {
        let (requests, failures) = (self.requests, self.failures.min(self.requests));
        let success_rate = if requests == 0 { 0.0 } else { (requests - failures) as f64 * 100.0 / requests as f64 };
        Figures { requests, success_rate, p99: quantile(&self.duration.buckets, 0.99), replicas }
    }

    /// The figures of the window between `earlier` and `self`, on one replica.
    pub fn since(&self, earlier: &Totals) -> Figures {
        self.delta(earlier).figures(1)
    }
}

/// A canary's counters on every replica that reported them: this one's under [`OWN`], each peer's
/// under its instance id (new at each start, so a restarted replica is a new entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetTotals(pub BTreeMap<String, Totals>);

/// The key of this replica's own counters in [`FleetTotals`].
pub const OWN: &str = "";

impl FleetTotals {
    /// This replica's counters (`snapshot`) and each peer's, for the series of one canary. A peer
    /// with other histogram buckets is left out.
    pub fn of(snapshot: &[RouteSnapshot], peers: &[Traffic], series: &[(String, String)]) -> FleetTotals {
        let mut fleet = BTreeMap::from([(OWN.to_string(), Totals::of(snapshot, series))]);
        for peer in peers {
            if let Some(t) = Totals::of_traffic(peer, series) {
                fleet.insert(peer.instance.clone(), t);
            }
        }
        FleetTotals(fleet)
    }

    /// The window's figures over the fleet: the sum of each replica's change since `earlier`.
    /// A replica not in `earlier` (it started, or first answered, during the window) counts from
    /// the next window on, since what it had served before the window began is not known.
    pub fn since(&self, earlier: &FleetTotals) -> Figures {
        let mut sum = Totals::default();
        let mut replicas = 0;
        for (instance, now) in &self.0 {
            let Some(before) = earlier.0.get(instance) else { continue };
            let d = now.delta(before);
            sum.add(d.requests, d.failures, &d.duration.buckets);
            replicas += 1;
        }
        sum.figures(replicas)
    }
}

/// The 99th percentile of a window's durations, as Prometheus' `histogram_quantile` estimates it:
/// linear within the bucket that holds it; above the last bound, the last bound.
fn quantile(buckets: &[u64; DURATION_BUCKETS.len() + 1], q: f64) -> Duration {
    let count: u64 = buckets.iter().sum();
    if count == 0 {
        return Duration::ZERO;
    }
    let rank = q * count as f64;
    let mut below = 0u64;
    for (i, &n) in buckets.iter().enumerate() {
        if (below + n) as f64 >= rank && n > 0 {
            let Some(&upper) = DURATION_BUCKETS.get(i) else {
                return Duration::from_secs_f64(DURATION_BUCKETS[DURATION_BUCKETS.len() - 1]);
            };
            let lower = if i == 0 { 0.0 } else { DURATION_BUCKETS[i - 1] };
            let within = (rank - below as f64) / n as f64;
            return Duration::from_secs_f64(lower + (upper - lower) * within);
        }
        below += n;
    }
    Duration::from_secs_f64(DURATION_BUCKETS[DURATION_BUCKETS.len() - 1])
}

/// One window's figures for the canary's backend.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub requests: u64,
    /// Percent of requests not answered 5xx (0 without requests).
    pub success_rate: f64,
    pub p99: Duration,
    /// How many replicas' counters the figures sum (this one and the peers that answered).
    pub replicas: usize,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} requests, success rate {:.2}%, p99 {}", self.requests, self.success_rate, ms(self.p99))?;
        if self.replicas > 1 {
            write!(f, " (over {} replicas)", self.replicas)?;
        }
        Ok(())
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}ms", d.as_secs_f64() * 1000.0)
}

/// What a decision was, for the Event's reason and the audit record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Outcome {
    CanaryStarted,
    CanaryStepped,
    /// A check failed below the threshold: the weight stays.
    CanaryCheckFailed,
    CanaryPromoted,
    CanaryAborted,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::CanaryStarted => "CanaryStarted",
            Outcome::CanaryStepped => "CanaryStepped",
            Outcome::CanaryCheckFailed => "CanaryCheckFailed",
            Outcome::CanaryPromoted => "CanaryPromoted",
            Outcome::CanaryAborted => "CanaryAborted",
        }
    }

    /// Whether the Event is a Warning.
    pub fn is_warning(self) -> bool {
        matches!(self, Outcome::CanaryCheckFailed | Outcome::CanaryAborted)
    }
}

/// The first state of a canary that starts promotion: one step in, no figures needed (at its
/// configured weight there may be no traffic to judge).
pub fn start(settings: &AutoPromote, backend: &str, now: &str) -> (CanaryState, String) {
    let weight = settings.step_weight.min(settings.max_weight);
    let state = CanaryState {
        phase: Phase::Progressing,
        weight,
        step: 1,
        failures: 0,
        last: "started".into(),
        at: now.into(),
        backend: backend.into(),
    };
    let note = format!(
        "auto-promotion started: weight {weight}, then +{} every {} while the checks pass, up to {}",
        settings.step_weight,
        humantime::format_duration(settings.interval),
        settings.max_weight
    );
    (state, note)
}

/// The decision at the end of a window of a canary that is progressing: the new state, what it was
/// and the Event's note. `total` is the canary's weight total; `kind` says what the note tells the
/// user to change once the canary is promoted.
pub fn decide(
    settings: &AutoPromote,
    kind: CanaryKind,
    total: u32,
    state: &CanaryState,
    figures: &Figures,
    now: &str,
) -> (CanaryState, Outcome, String) {
    let mut next = state.clone();
    next.at = now.into();
    match settings.check(figures) {
        Ok(()) if state.weight >= settings.max_weight => {
            next.phase = Phase::Promoted;
            next.weight = total;
            next.last = "promoted".into();
            let note = format!(
                "promoted at weight {} ({figures}): the canary now takes every request by weight. {}",
                state.weight,
                kind.after_promotion()
            );
            (next, Outcome::CanaryPromoted, note)
        }
        Ok(()) => {
            next.weight = (state.weight + settings.step_weight).min(settings.max_weight);
            next.step += 1;
            next.last = "stepped".into();
            let note = format!("weight {} -> {} ({figures})", state.weight, next.weight);
            (next, Outcome::CanaryStepped, note)
        }
        Err(why) => {
            next.failures += 1;
            if next.failures >= settings.failure_threshold {
                next.phase = Phase::Aborted;
                next.weight = 0;
                next.last = "aborted".into();
                let note =
                    format!("aborted to weight 0 after {} failed checks; the last: {why} ({figures})", next.failures);
                (next, Outcome::CanaryAborted, note)
            } else {
                next.last = "check-failed".into();
                let note = format!(
                    "check failed ({}/{}), weight stays {}: {why} ({figures})",
                    next.failures, settings.failure_threshold, state.weight
                );
                (next, Outcome::CanaryCheckFailed, note)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (format!("ramjet.dev/{k}"), v.to_string())).collect()
    }

    #[test]
    fn settings_have_defaults_and_bad_values_turn_promotion_off() {
        let mut problems = Vec::new();
        assert_eq!(AutoPromote::from_annotations(Some(&map(&[])), 100, &mut problems), None);
        let on = map(&[("canary-auto-promote", "true")]);
        assert_eq!(AutoPromote::from_annotations(Some(&on), 100, &mut problems), Some(AutoPromote::default()));
        let all = map(&[
            ("canary-auto-promote", "true"),
            ("canary-step-weight", "20"),
            ("canary-max-weight", "80"),
            ("canary-interval", "2s"),
            ("canary-min-requests", "5"),
            ("canary-min-success-rate", "95.5"),
            ("canary-max-p99", "250ms"),
            ("canary-failure-threshold", "2"),
        ]);
        let got = AutoPromote::from_annotations(Some(&all), 100, &mut problems).unwrap();
        assert_eq!(
            got,
            AutoPromote {
                step_weight: 20,
                max_weight: 80,
                interval: Duration::from_secs(2),
                min_requests: 5,
                min_success_rate: 95.5,
                max_p99: Duration::from_millis(250),
                failure_threshold: 2,
            }
        );
        assert!(problems.is_empty(), "{problems:?}");
        for (name, value) in [
            ("canary-step-weight", "0"),
            ("canary-max-weight", "101"),
            ("canary-interval", "soon"),
            ("canary-min-success-rate", "120"),
            ("canary-max-p99", "-1s"),
            ("canary-failure-threshold", "0"),
            ("canary-auto-promote", "yes"),
        ] {
            let mut m = map(&[("canary-auto-promote", "true")]);
            m.insert(format!("ramjet.dev/{name}"), value.into());
            let mut problems = Vec::new();
            assert_eq!(AutoPromote::from_annotations(Some(&m), 100, &mut problems), None, "{name}: {value}");
            assert_eq!(problems.len(), 1, "{name}: {value}: {problems:?}");
            assert!(problems[0].contains(name) && problems[0].contains("not auto-promoted"), "{problems:?}");
        }
    }

    fn figures(requests: u64, success_rate: f64, p99_ms: u64) -> Figures {
        Figures { requests, success_rate, p99: Duration::from_millis(p99_ms), replicas: 1 }
    }

    #[test]
    fn a_healthy_canary_steps_to_max_then_is_promoted() {
        let s = AutoPromote { step_weight: 20, max_weight: 50, min_requests: 10, ..AutoPromote::default() };
        let (mut state, _) = start(&s, "ns/v2:80", "t0");
        assert_eq!((state.phase, state.weight, state.step), (Phase::Progressing, 20, 1));
        let mut seen = Vec::new();
        for _ in 0..3 {
            let (next, outcome, _) = decide(&s, CanaryKind::Ingress, 100, &state, &figures(50, 100.0, 20), "t");
            seen.push((outcome, next.weight));
            state = next;
        }
        assert_eq!(seen, [(Outcome::CanaryStepped, 40), (Outcome::CanaryStepped, 50), (Outcome::CanaryPromoted, 100)]);
        assert_eq!(state.phase, Phase::Promoted);
        assert_eq!(state.served_weight(100), 100);
    }

    #[test]
    fn failed_checks_count_and_abort_at_the_threshold() {
        let s = AutoPromote { failure_threshold: 2, min_requests: 10, ..AutoPromote::default() };
        let (state, _) = start(&s, "b", "t0");
        let (state, outcome, note) = decide(&s, CanaryKind::Ingress, 100, &state, &figures(100, 90.0, 10), "t1");
        assert_eq!((outcome, state.weight, state.failures), (Outcome::CanaryCheckFailed, 10, 1));
        assert!(note.contains("success rate 90.00% is below 99%"), "{note}");
        let (state, outcome, note) = decide(&s, CanaryKind::Ingress, 100, &state, &figures(3, 100.0, 10), "t2");
        assert_eq!((outcome, state.phase, state.weight), (Outcome::CanaryAborted, Phase::Aborted, 0));
        assert!(note.contains("3 requests, fewer than the 10 needed"), "{note}");
        let slow = decide(&s, CanaryKind::Ingress, 100, &start(&s, "b", "t").0, &figures(100, 100.0, 900), "t").2;
        assert!(slow.contains("p99 900.0ms is above 500.0ms"), "{slow}");
    }

    #[test]
    fn the_state_round_trips_and_foreign_text_is_not_a_state() {
        let (state, _) = start(&AutoPromote::default(), "ns/v2:80", "2026-12-01T05:00:00Z");
        let text = state.render();
        assert_eq!(
            text,
            r#"{"phase":"Progressing","weight":10,"step":1,"failures":0,"last":"started","at":"2026-12-01T05:00:00Z","backend":"ns/v2:80"}"#
        );
        assert_eq!(CanaryState::parse(&text), Some(state));
        assert_eq!(CanaryState::parse("50"), None);
        assert_eq!(CanaryState::parse(r#"{"phase":"Done"}"#), None);
    }

    #[test]
    fn window_figures_come_from_counter_differences() {
        let mut before = Totals { requests: 100, failures: 1, ..Totals::default() };
        before.duration.buckets[0] = 100;
        let mut after = before.clone();
        after.requests = 300;
        after.failures = 11;
        // 200 new requests: 190 within 5 ms, 10 between 250 and 500 ms.
        after.duration.buckets[0] += 190;
        after.duration.buckets[6] += 10;
        let f = after.since(&before);
        assert_eq!(f.requests, 200);
        assert!((f.success_rate - 95.0).abs() < 1e-9);
        // Rank 198 of 200 is the 8th of the 10 in (250 ms, 500 ms]: 250 + 250 × 0.8 = 450 ms.
        assert_eq!(f.p99.as_millis(), 450);
        assert_eq!(Totals::default().since(&before).requests, 0);
    }

    /// The fleet's figures are the sum of each replica's window: a replica that restarted (a new
    /// instance id) or appeared in the window counts from the next window, one that is gone is
    /// left out, and a peer with other histogram buckets is not read at all.
    #[test]
    fn fleet_figures_sum_each_replicas_window() {
        use ramjet_shared::admin::RouteTraffic;
        let series = vec![("ns/web-canary".to_string(), "ns/v2:80".to_string())];
        let peer = |instance: &str, requests: u64, errors: u64| {
            let mut buckets = vec![0; DURATION_BUCKETS.len() + 1];
            buckets[0] = requests;
            Traffic {
                instance: instance.into(),
                bounds: DURATION_BUCKETS.to_vec(),
                routes: vec![RouteTraffic {
                    route: series[0].0.clone(),
                    backend: series[0].1.clone(),
                    requests,
                    client_errors: 0,
                    server_errors: errors,
                    duration_buckets: buckets,
                    duration_sum_us: 0,
                    bytes_in: 0,
                    bytes_out: 0,
                    upstream_connect_errors: 0,
                }],
            }
        };
        let before = FleetTotals::of(&[], &[peer("a", 100, 0), peer("b", 50, 0), peer("gone", 10, 0)], &series);
        let after = FleetTotals::of(&[], &[peer("a", 300, 10), peer("b", 150, 0), peer("new", 999, 999)], &series);
        let f = after.since(&before);
        // a: 200 (10 failed), b: 100; ramjet itself: 0; "new" and "gone" add nothing.
        assert_eq!((f.requests, f.replicas), (300, 3));
        assert!((f.success_rate - 290.0 / 3.0).abs() < 1e-9, "{f}");
        assert!(f.to_string().ends_with("(over 3 replicas)"), "{f}");
        let mut other = peer("a", 1000, 0);
        other.bounds.pop();
        assert_eq!(FleetTotals::of(&[], &[other], &series).0.len(), 1, "only ramjet's own");
    }
}
