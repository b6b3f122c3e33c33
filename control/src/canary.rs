//! Canaries and mirrors as the compiler sees them: read from annotations (ingress-nginx's and
//! `ramjet.dev/`'s) or from a static routes file, and turned into the route model's rules.
//!
//! A canary compiles to ingress-nginx's decision, in its order (its `balancer.lua`,
//! `route_to_alternative_balancer`):
//!
//! 1. the `canary-by-header` field: with `-value`, that exact value sends to the canary; else with
//!    `-pattern`, a match of that regular expression does; else `always` does and `never` sends to
//!    the primary. Any other value falls through;
//! 2. the `canary-by-cookie` cookie: `always` to the canary, `never` to the primary, else falls
//!    through;
//! 3. the weight: `canary-weight` out of `canary-weight-total` (which, as in ingress-nginx, counts
//!    only above 100: a smaller total is 100).
//!
//! `docs/canaries.md` describes it for users.

use std::collections::BTreeMap;
use std::sync::Arc;

pub mod promotion;

use ramjet_shared::{endpoint_key, Backend, BackendKind, Condition, Filter, Matcher, Mirror, Rule, WeightedBackend};

/// The annotation prefixes read, in order: ramjet's own wins over ingress-nginx's.
pub const PREFIXES: [&str; 2] = ["ramjet.dev/", "nginx.ingress.kubernetes.io/"];

/// A canary's traffic policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CanarySpec {
    pub weight: u32,
    pub weight_total: u32,
    pub header: Option<String>,
    pub header_value: Option<String>,
    pub header_pattern: Option<String>,
    pub cookie: Option<String>,
    /// Keep each user on one side while the weight moves (`ramjet.dev/canary-sticky: cookie`).
    pub sticky: bool,
    /// `affinity-canary-behavior: legacy`: a session-affinity cookie naming a canary endpoint does
    /// not keep its user on the canary (ingress-nginx before v0.47).
    pub legacy_affinity: bool,
}

/// The total requests are drawn from, as ingress-nginx computes it: the given total only when it
/// is above 100.
pub fn effective_total(weight_total: u32) -> u32 {
    weight_total.max(100)
}

impl CanarySpec {
    /// The rules that send requests to `canary` or `primary`, in ingress-nginx's order; the last one
    /// (the weight) always holds. `filters` (the primary's mirror) go on every rule. A header pattern
    /// that does not compile sends requests with the header to the primary (ingress-nginx's match
    /// error) and is reported.
    ///
    /// With the primary's session affinity (its cookie's name, `affinity`), a user the cookie ties
    /// to a primary endpoint stays on the primary, and one tied to a canary endpoint stays on the
    /// canary (unless `affinity-canary-behavior: legacy`), before any other rule: ingress-nginx's
    /// `route_to_alternative_balancer`.
    pub fn rules(
        &self,
        primary: &Arc<Backend>,
        canary: &Arc<Backend>,
        affinity: Option<&str>,
        mirror: Option<&MirrorTarget>,
        problems: &mut Vec<String>,
    ) -> Vec<Rule> {
        let mut rules = Vec::new();
        if let Some(cookie) = affinity {
            let sticky_to = |backend: &Backend| Condition::StickyTo {
                cookie: cookie.into(),
                endpoints: match &backend.kind {
                    BackendKind::Endpoints(addrs) => addrs.iter().map(|a| endpoint_key(*a)).collect(),
                    BackendKind::Respond(_) => Box::new([]),
                },
            };
            rules.push(Rule::to(vec![sticky_to(primary)], primary.clone()));
            if !self.legacy_affinity {
                rules.push(Rule::to(vec![sticky_to(canary)], canary.clone()));
            }
        }
        let header = |name: &str, value: Matcher| Condition::Header { name: name.to_ascii_lowercase().into(), value };
        if let Some(name) = self.header.as_deref().filter(|h| !h.is_empty()) {
            if let Some(value) = self.header_value.as_deref().filter(|v| !v.is_empty()) {
                rules.push(Rule::to(vec![header(name, Matcher::exact(value))], canary.clone()));
            } else if let Some(pattern) = self.header_pattern.as_deref().filter(|v| !v.is_empty()) {
                match Matcher::regex(pattern) {
                    Ok(m) => rules.push(Rule::to(vec![header(name, m)], canary.clone())),
                    Err(e) => {
                        // ingress-nginx's balancer.lua: a match error sends a request that has the
                        // header to the primary, before the cookie and the weight are looked at.
                        let present = Matcher::regex("").expect("the empty pattern compiles");
                        rules.push(Rule::to(vec![header(name, present)], primary.clone()));
                        problems.push(format!(
                            "canary-by-header-pattern: {e}; requests with the header {name} go to the primary"
                        ));
                    }
                }
            } else {
                rules.push(Rule::to(vec![header(name, Matcher::exact("always"))], canary.clone()));
                rules.push(Rule::to(vec![header(name, Matcher::exact("never"))], primary.clone()));
            }
        }
        if let Some(name) = self.cookie.as_deref().filter(|c| !c.is_empty()) {
            let cookie = |value: &str| Condition::Cookie { name: name.into(), value: Matcher::exact(value) };
            rules.push(Rule::to(vec![cookie("always")], canary.clone()));
            rules.push(Rule::to(vec![cookie("never")], primary.clone()));
        }
        let total = effective_total(self.weight_total);
        let weight = self.weight.min(total);
        // The canary first: as its weight grows, sticky users move only from the primary to it.
        rules.push(Rule::split(
            vec![],
            vec![WeightedBackend::new(canary.clone(), weight), WeightedBackend::new(primary.clone(), total - weight)],
            total,
            self.sticky,
        ));
        if let Some(mirror) = mirror {
            rules = rules.into_iter().map(|r| r.with_filters(vec![Filter::Mirror(mirror.to_mirror())])).collect();
        }
        rules
    }
}

/// A mirror, resolved to a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorTarget {
    pub backend: Arc<Backend>,
    pub percent: u8,
    pub body: bool,
    pub host: Option<String>,
    /// The path copies ask for in place of the request's (a `mirror-target` URL's own path).
    pub path: Option<String>,
}

impl MirrorTarget {
    pub fn to_mirror(&self) -> Mirror {
        Mirror {
            backend: self.backend.clone(),
            percent: self.percent,
            body: self.body,
            host: self.host.as_deref().map(Into::into),
            path: self.path.as_deref().map(Into::into),
        }
    }
}

/// Reads annotations under either prefix.
pub struct Annotations<'a> {
    map: Option<&'a BTreeMap<String, String>>,
}

impl<'a> Annotations<'a> {
    pub fn new(map: Option<&'a BTreeMap<String, String>>) -> Self {
        Annotations { map }
    }

    /// The value of `name` under `ramjet.dev/`, else under `nginx.ingress.kubernetes.io/`, with the
    /// full annotation name it was found under.
    pub fn get(&self, name: &str) -> Option<(String, &'a str)> {
        let map = self.map?;
        PREFIXES.iter().find_map(|p| {
            let key = format!("{p}{name}");
            map.get(&key).map(|v| (key, v.as_str()))
        })
    }

    /// [`Annotations::get`], when the value is not blank (a blank annotation asks for nothing).
    pub fn given(&self, name: &str) -> Option<(String, &'a str)> {
        self.get(name).filter(|(_, v)| !v.trim().is_empty())
    }

    /// Whether the Ingress is marked as a canary (`canary: "true"`).
    pub fn is_canary(&self) -> bool {
        self.get("canary").is_some_and(|(_, v)| v.trim().eq_ignore_ascii_case("true"))
    }

    /// The canary policy of an Ingress marked as a canary. A value that cannot be read is reported
    /// in `problems` and taken as ingress-nginx takes it: the annotation's default.
    pub fn canary(&self, problems: &mut Vec<String>) -> CanarySpec {
        let mut spec = CanarySpec { weight_total: 100, ..CanarySpec::default() };
        let mut number = |name: &str, default: u32| match self.get(name) {
            None => default,
            Some((key, v)) => match v.trim().parse::<u32>() {
                Ok(n) => n,
                Err(_) => {
                    problems.push(format!("{key}: `{v}` is not a whole number; {default} is used"));
                    default
                }
            },
        };
        spec.weight = number("canary-weight", 0);
        spec.weight_total = number("canary-weight-total", 100);
        if spec.weight_total == 0 {
            problems.push("canary-weight-total: 0 is not a total; 100 is used".into());
            spec.weight_total = 100;
        }
        let string = |name: &str| self.get(name).map(|(_, v)| v.trim().to_string()).filter(|v| !v.is_empty());
        spec.header = string("canary-by-header");
        spec.header_value = string("canary-by-header-value");
        spec.header_pattern = string("canary-by-header-pattern");
        spec.cookie = string("canary-by-cookie");
        if let Some(h) = &spec.header {
            if !is_token(h) {
                problems.push(format!("canary-by-header: `{h}` is not a header name; it is ignored"));
                spec.header = None;
            }
        }
        if spec.header.is_none() && (spec.header_value.is_some() || spec.header_pattern.is_some()) {
            problems.push("canary-by-header-value / -pattern need canary-by-header; they are ignored".into());
        }
        match self.get("affinity-canary-behavior").map(|(key, v)| (key, v.trim())) {
            None | Some((_, "" | "sticky")) => {}
            Some((_, "legacy")) => spec.legacy_affinity = true,
            Some((key, v)) => problems.push(format!("{key}: `{v}` is neither sticky nor legacy; sticky is used")),
        }
        match self.get("canary-sticky") {
            None => {}
            Some((_, v)) if v.trim() == "cookie" => spec.sticky = true,
            Some((key, v)) => problems.push(format!("{key}: `{v}` is not `cookie`; the canary is not sticky")),
        }
        spec
    }

    /// The names of canary annotations present on an Ingress that is not marked as a canary.
    pub fn stray_canary_annotations(&self) -> Vec<String> {
        let Some(map) = self.map else { return Vec::new() };
        map.keys()
            .filter(|k| PREFIXES.iter().any(|p| k.strip_prefix(p).is_some_and(|n| n.starts_with("canary-"))))
            .cloned()
            .collect()
    }
}

/// An HTTP field name (RFC 9110 token).
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
