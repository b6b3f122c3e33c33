//! What a route does beyond "send the request to its backend": ordered rules with request
//! conditions (header, cookie, query parameter, method), weighted backends, and filters (a mirror).
//! It is the shape of a Gateway API HTTPRoute rule, so Ingress annotations (canaries, mirrors) and
//! HTTPRoute compile into the same thing.
//!
//! A route without a policy (most routes) costs nothing here. A route with one is evaluated on the
//! worker: the rules in order, the first whose conditions all hold picks a backend from its weighted
//! list with the worker's own random numbers (no lock, no shared counter). When no rule holds the
//! route's own backend serves.
//!
//! ```
//! use std::sync::Arc;
//! use ramjet_shared::{Backend, Condition, Matcher, Rule, RoutePolicy, WeightedBackend};
//!
//! let stable = Arc::new(Backend::respond("stable", 0, 200, "stable"));
//! let canary = Arc::new(Backend::respond("canary", 1, 200, "canary"));
//! // ingress-nginx's `canary-by-header: x-canary` then `canary-weight: 10`.
//! let policy = RoutePolicy::new(vec![
//!     Rule::to(vec![Condition::Header { name: "x-canary".into(), value: Matcher::exact("always") }], canary.clone()),
//!     Rule::to(vec![Condition::Header { name: "x-canary".into(), value: Matcher::exact("never") }], stable.clone()),
//!     Rule::split(vec![], vec![WeightedBackend::new(canary, 10), WeightedBackend::new(stable, 90)], 100, false),
//! ]);
//! assert_eq!(policy.rules.len(), 3);
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use regex_automata::dfa::regex::Regex;
use regex_automata::util::syntax;

use super::affinity::Affinity;
use super::basic_auth::BasicAuth;
use super::client_auth::ClientAuth;
use super::client_limits::ClientLimits;
use super::cors::Cors;
use super::error_pages::ErrorPages;
use super::external_auth::ExternalAuth;
use super::filter::{HeaderEdits, Redirect, Rewrite};
use super::hash_by::HashBy;
use super::next_upstream::NextUpstream;
use super::request::{find_pair, RequestView};
use super::rewrite::PathRewrite;
use super::source_ranges::SourceRanges;
use super::Backend;
use crate::digest;

/// How a request value is compared.
#[derive(Clone, serde::Serialize)]
pub enum Matcher {
    /// Byte-for-byte equal (case sensitive, as ingress-nginx compares canary header values).
    Exact(Box<str>),
    /// A regular expression searched anywhere in the value (unanchored, as PCRE's `ngx.re.match`
    /// does unless the pattern anchors itself). Compiled to a DFA at compile time: matching needs no
    /// cache, so no lock and no allocation on the worker.
    Regex {
        pattern: Box<str>,
        /// Compiled from `pattern`, which says all it does.
        #[serde(skip)]
        regex: Box<Regex>,
    },
}

/// Largest DFA a pattern may compile to; a pattern beyond it is refused at compile time.
const REGEX_DFA_LIMIT: usize = 1 << 20;

impl Matcher {
    pub fn exact(value: &str) -> Self {
        Matcher::Exact(value.into())
    }

    /// Compiles `pattern` (byte-oriented, ASCII classes, like PCRE without UTF mode).
    pub fn regex(pattern: &str) -> Result<Self, String> {
        let regex = Regex::builder()
            .syntax(syntax::Config::new().unicode(false).utf8(false))
            .dense(
                regex_automata::dfa::dense::Config::new()
                    .dfa_size_limit(Some(REGEX_DFA_LIMIT))
                    .determinize_size_limit(Some(REGEX_DFA_LIMIT)),
            )
            .build(pattern)
            .map_err(|e| format!("`{pattern}` is not a usable regular expression: {e}"))?;
        Ok(Matcher::Regex { pattern: pattern.into(), regex: Box::new(regex) })
    }

    #[inline]
    pub fn matches(&self, value: &[u8]) -> bool {
        match self {
            Matcher::Exact(v) => v.as_bytes() == value,
            Matcher::Regex { regex, .. } => regex.is_match(value),
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Matcher::Exact(v) => write!(f, "== {v:?}"),
            Matcher::Regex { pattern, .. } => write!(f, "=~ /{pattern}/"),
        }
    }
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Matcher::Exact(a), Matcher::Exact(b)) => a == b,
            (Matcher::Regex { pattern: a, .. }, Matcher::Regex { pattern: b, .. }) => a == b,
            _ => false,
        }
    }
}

impl Eq for Matcher {}

/// One condition on the request. Header and cookie names compare without regard to case, the
/// values as the matcher says. A condition on an absent field does not hold.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Condition {
    /// The first field with this name (lower case).
    Header { name: Box<str>, value: Matcher },
    /// The first cookie with this name in the `Cookie` fields.
    Cookie { name: Box<str>, value: Matcher },
    /// The first query parameter with this name (as sent, not percent-decoded).
    Query { name: Box<str>, value: Matcher },
    /// The request method, exactly (`GET`).
    Method(Box<str>),
    /// The request path as sent (before any rewrite, without the query): Gateway API's
    /// `RegularExpression` path match, which the route table's prefix and exact keys cannot express.
    Path(Matcher),
    /// The request came over TLS (`true`) or in plain text: a Gateway API route attached only to
    /// HTTPS listeners, or only to HTTP ones, for a host the other kind serves too.
    Tls(bool),
    /// The session-affinity cookie `cookie` names one of these endpoints (by
    /// [`crate::endpoint_key`]): a user already kept on one side of a canary stays there.
    StickyTo { cookie: Box<str>, endpoints: Box<[u64]> },
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Header { name, value } => write!(f, "header {name} {value}"),
            Condition::Cookie { name, value } => write!(f, "cookie {name} {value}"),
            Condition::Query { name, value } => write!(f, "query {name} {value}"),
            Condition::Method(m) => write!(f, "method {m}"),
            Condition::Path(value) => write!(f, "path {value}"),
            Condition::Tls(true) => f.write_str("over TLS"),
            Condition::Tls(false) => f.write_str("in plain text"),
            Condition::StickyTo { cookie, endpoints } => {
                write!(f, "cookie {cookie} names one of {} endpoints", endpoints.len())
            }
        }
    }
}

/// A backend and its share of a rule's traffic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WeightedBackend {
    #[serde(serialize_with = "Backend::serialize_digest")]
    pub backend: Arc<Backend>,
    pub weight: u32,
    /// When not empty, the filters for the requests sent to this backend, in place of the rule's
    /// (Gateway API filters on a backendRef; [`WeightedBackend::with_own_filters`] merges the
    /// rule's into them).
    pub filters: Box<[Filter]>,
}

impl WeightedBackend {
    pub fn new(backend: Arc<Backend>, weight: u32) -> Self {
        WeightedBackend { backend, weight, filters: Box::default() }
    }

    /// This backend's own header edits (`own`: request and response header filters) applied after
    /// the rule's `filters`: the filters its requests get.
    pub fn with_own_filters(mut self, rule: &[Filter], own: &[Filter]) -> Self {
        if own.is_empty() {
            return self;
        }
        let mut filters = rule.to_vec();
        for filter in own {
            let later = match filter {
                Filter::RequestHeaders(e) | Filter::ResponseHeaders(e) => e,
                _ => continue,
            };
            let same_kind = filters.iter_mut().find(|f| std::mem::discriminant(*f) == std::mem::discriminant(filter));
            match same_kind {
                Some(Filter::RequestHeaders(e) | Filter::ResponseHeaders(e)) => *e = e.then(later),
                _ => filters.push(filter.clone()),
            }
        }
        self.filters = filters.into_boxed_slice();
        self
    }
}

/// A copy of each request (a share of them) sent to another backend; its answer is discarded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mirror {
    #[serde(serialize_with = "Backend::serialize_digest")]
    pub backend: Arc<Backend>,
    /// Share of requests mirrored, 0–100.
    pub percent: u8,
    /// Send the request body too (up to the worker's bound); without it the copy carries none.
    pub body: bool,
    /// The `Host` the copy carries; `None`: the request's own.
    pub host: Option<Box<str>>,
    /// The path the copy asks for in place of the request's, its query kept (a `mirror-target`
    /// URL with a path of its own); `None`: the request's target.
    pub path: Option<Box<str>>,
}

impl fmt::Display for Mirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}%", self.backend.name, self.percent)?;
        if !self.body {
            f.write_str(" without body")?;
        }
        if let Some(host) = &self.host {
            write!(f, " host {host}")?;
        }
        if let Some(path) = &self.path {
            write!(f, " path {path}")?;
        }
        Ok(())
    }
}

/// What a request transforms on its way (Gateway API's filters).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Filter {
    Mirror(Mirror),
    /// The path sent upstream is rewritten (the query is kept): ingress-nginx's `rewrite-target`,
    /// route-wide.
    PathRewrite(PathRewrite),
    /// The request sent upstream carries this field, replacing any the client sent (nginx's
    /// `proxy_set_header`). The name is lower case.
    SetRequestHeader {
        name: Box<str>,
        value: Box<str>,
    },
    /// ingress-nginx's `app-root`: a request for `/` (whatever its query) is answered `302` to
    /// `<scheme>://<Host as sent><path>`.
    AppRoot(Box<str>),
    /// ingress-nginx's `from-to-www-redirect`: every request answers `308` to
    /// `<scheme>://<host>:<port the client used><request target less one trailing slash>`.
    HostRedirect(Box<str>),
    /// Header changes on the request sent upstream.
    RequestHeaders(HeaderEdits),
    /// Header changes on the response sent to the client.
    ResponseHeaders(HeaderEdits),
    /// Another path and/or `Host` upstream.
    Rewrite(Rewrite),
    /// Ramjet answers with a redirect; the rule's backends are not used.
    Redirect(Redirect),
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Filter::Mirror(m) => write!(f, "mirror to {m}"),
            Filter::PathRewrite(r) => write!(f, "{r}"),
            Filter::SetRequestHeader { name, value } => write!(f, "set {name}: {value}"),
            Filter::AppRoot(path) => write!(f, "/ redirected to {path}"),
            Filter::HostRedirect(host) => write!(f, "redirected to {host}"),
            Filter::RequestHeaders(e) => write!(f, "request headers: {e}"),
            Filter::ResponseHeaders(e) => write!(f, "response headers: {e}"),
            Filter::Rewrite(r) => {
                f.write_str("rewrite")?;
                if let Some(host) = &r.host {
                    write!(f, " host {host}")?;
                }
                if let Some(path) = &r.path {
                    write!(f, " {path}")?;
                }
                Ok(())
            }
            Filter::Redirect(r) => write!(f, "redirect {}", r.status()),
        }
    }
}

/// What a rule changes on a proxied request and its response ([`Rule::edits`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Edits<'r> {
    pub request: Option<&'r HeaderEdits>,
    pub rewrite: Option<&'r Rewrite>,
    pub response: Option<&'r HeaderEdits>,
}

impl<'r> Edits<'r> {
    /// The header edits for the request upstream, the path/host rewrite and the header edits for
    /// the response among `filters` (one walk).
    #[inline]
    pub fn of(filters: &'r [Filter]) -> Self {
        let mut edits = Edits::default();
        for f in filters.iter() {
            match f {
                Filter::RequestHeaders(e) => edits.request = Some(e),
                Filter::ResponseHeaders(e) => edits.response = Some(e),
                Filter::Rewrite(r) => edits.rewrite = Some(r),
                // Redirects answer instead; the rest are route-wide (ingress-nginx annotations).
                _ => {}
            }
        }
        edits
    }

    /// Whether the request sent upstream changes.
    #[inline]
    pub fn changes_request(&self) -> bool {
        self.request.is_some() || self.rewrite.is_some()
    }
}

/// One rule: when every condition holds, a backend is picked by weight (and the filters apply).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rule {
    pub conditions: Box<[Condition]>,
    /// Picked by weight: a request draws a number below `total` and takes the backend whose
    /// cumulative weight range holds it. Numbers at or above the sum of the weights (when `total`
    /// is larger) take the last backend.
    pub backends: Box<[WeightedBackend]>,
    pub total: u32,
    /// Draw the number once per user and keep it in a cookie ([`STICKY_COOKIE`]), so a user stays on
    /// one side while the weights move (the first backends gain users only from the later ones as
    /// their weights grow).
    pub sticky: bool,
    pub filters: Box<[Filter]>,
    /// The answer must have come within this long of ramjet starting to send the request upstream,
    /// its body included (Gateway API's `timeouts`): 504 when the head is late, the connection
    /// closed when the body is. `None`: only the per-operation upstream timeouts apply.
    pub deadline: Option<Duration>,
}

/// The cookie that carries a user's draw for sticky weighted rules: a number below
/// [`STICKY_RANGE`].
pub const STICKY_COOKIE: &str = "ramjet_canary";
/// Sticky draws are in `0..STICKY_RANGE`, scaled to a rule's total.
pub const STICKY_RANGE: u32 = 10_000;

impl Rule {
    /// All matching requests to one backend.
    pub fn to(conditions: Vec<Condition>, backend: Arc<Backend>) -> Self {
        Rule::split(conditions, vec![WeightedBackend::new(backend, 1)], 1, false)
    }

    /// Matching requests split by weight over `total` (at least the sum of the weights).
    pub fn split(conditions: Vec<Condition>, backends: Vec<WeightedBackend>, total: u32, sticky: bool) -> Self {
        let sum: u32 = backends.iter().map(|b| b.weight).sum();
        Rule {
            conditions: conditions.into_boxed_slice(),
            backends: backends.into_boxed_slice(),
            total: total.max(sum).max(1),
            sticky,
            filters: Box::new([]),
            deadline: None,
        }
    }

    pub fn with_filters(mut self, filters: Vec<Filter>) -> Self {
        self.filters = filters.into_boxed_slice();
        self
    }

    pub fn with_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The backend for a draw below `self.total`.
    #[inline]
    pub fn pick(&self, draw: u32) -> &WeightedBackend {
        let mut upto = 0;
        for b in self.backends.iter() {
            upto += b.weight;
            if draw < upto {
                return b;
            }
        }
        &self.backends[self.backends.len() - 1]
    }

    /// The filters for requests sent to `picked` (one of this rule's backends): its own, merged
    /// with the rule's, when it has any; else the rule's.
    #[inline]
    pub fn filters_for<'r>(&'r self, picked: &'r WeightedBackend) -> &'r [Filter] {
        if picked.filters.is_empty() {
            &self.filters
        } else {
            &picked.filters
        }
    }

    /// Whether the backends are split (more than one can be picked).
    pub fn is_split(&self) -> bool {
        self.backends.iter().filter(|b| b.weight > 0).count() > 1
    }

    /// The mirrors that get a copy of the rule's requests (Gateway API allows several).
    pub fn mirrors(&self) -> impl Iterator<Item = &Mirror> {
        self.filters.iter().filter_map(|f| match f {
            Filter::Mirror(m) => Some(m),
            _ => None,
        })
    }

    /// Whether the rule copies its requests anywhere.
    #[inline]
    pub fn has_mirrors(&self) -> bool {
        self.filters.iter().any(|f| matches!(f, Filter::Mirror(_)))
    }

    /// The redirect this rule answers with, if it has one.
    #[inline]
    pub fn redirect(&self) -> Option<&Redirect> {
        self.filters.iter().find_map(|f| match f {
            Filter::Redirect(r) => Some(r),
            _ => None,
        })
    }

    /// The header edits for the request upstream, the path/host rewrite and the header edits for
    /// the response, when the rule has any (one walk of its filters).
    #[inline]
    pub fn edits(&self) -> Edits<'_> {
        Edits::of(&self.filters)
    }
}

/// A backend's own filters, after its name: ` [set x: 1]`.
fn describe_own_filters(f: &mut fmt::Formatter<'_>, b: &WeightedBackend) -> fmt::Result {
    if b.filters.is_empty() {
        return Ok(());
    }
    f.write_str(" [")?;
    for (i, filter) in b.filters.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{filter}")?;
    }
    f.write_str("]")
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.describe(f)?;
        for filter in self.filters.iter() {
            write!(f, ", {filter}")?;
        }
        if let Some(d) = self.deadline {
            write!(f, ", within {d:?}")?;
        }
        Ok(())
    }
}

impl Rule {
    /// The conditions and backends, without the filters: `header x-canary == "always" -> b`.
    pub fn describe_choice(&self) -> String {
        struct Choice<'a>(&'a Rule);
        impl fmt::Display for Choice<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.describe(f)
            }
        }
        Choice(self).to_string()
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.conditions.is_empty() {
            f.write_str("always")?;
        }
        for (i, c) in self.conditions.iter().enumerate() {
            if i > 0 {
                f.write_str(" and ")?;
            }
            write!(f, "{c}")?;
        }
        f.write_str(" -> ")?;
        if let [only] = &self.backends[..] {
            f.write_str(&only.backend.name)?;
            describe_own_filters(f, only)?;
        } else {
            for (i, b) in self.backends.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{} {}/{}", b.backend.name, b.weight, self.total)?;
                describe_own_filters(f, b)?;
            }
        }
        if self.sticky {
            f.write_str(" (sticky)")?;
        }
        Ok(())
    }
}

/// A route's own limits (ingress-nginx's `proxy-body-size` and proxy timeouts); `None`: the
/// daemon's.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RouteLimits {
    /// Who may send requests (403 for the others).
    pub sources: SourceRanges,
    /// CORS fields and preflight answers.
    pub cors: Option<Box<Cors>>,
    /// Largest request body accepted (413 beyond); `None`: unlimited.
    pub max_body: Option<u64>,
    /// Connecting to an endpoint.
    pub connect_timeout: Option<Duration>,
    /// Each write of the request to the endpoint.
    pub send_timeout: Option<Duration>,
    /// Each read of the response from the endpoint.
    pub read_timeout: Option<Duration>,
    /// Requests per client address: rate and concurrency (ingress-nginx's `limit-*`).
    pub clients: Option<Arc<ClientLimits>>,
    /// Sticky sessions by cookie (ingress-nginx's `affinity: cookie`).
    pub affinity: Option<Arc<Affinity>>,
    /// Who may pass, by user and password (ingress-nginx's `auth-type: basic`); 401 for the others.
    pub auth: Option<Arc<BasicAuth>>,
    /// Endpoints chosen by a hash of the request (ingress-nginx's `upstream-hash-by`).
    pub hash_by: Option<Arc<HashBy>>,
    /// When a request goes on to the next endpoint (ingress-nginx's `proxy-next-upstream`);
    /// `None`: ramjet's default (a refused connection moves on once).
    pub next_upstream: Option<NextUpstream>,
    /// Backend answers replaced by an error backend's (ingress-nginx's `custom-http-errors`).
    pub error_pages: Option<Arc<ErrorPages>>,
    /// A sub-request decides who passes (ingress-nginx's `auth-url`).
    pub external_auth: Option<Arc<ExternalAuth>>,
    /// Endpoints chosen by their response times (ingress-nginx's `load-balance: ewma`), not in turn.
    pub ewma: bool,
    /// Client certificates, the host's (ingress-nginx's `auth-tls-*`): every route of the host has it.
    pub client_auth: Option<Arc<ClientAuth>>,
    /// Fields set on the backend's answers (ingress-nginx's `custom-headers`).
    pub response_headers: Option<Box<HeaderEdits>>,
    /// The route's requests leave no access-log record (ingress-nginx's `enable-access-log:
    /// "false"`).
    pub unlogged: bool,
    /// `Location` and `Set-Cookie` rewrites of the backends' answers (ingress-nginx's
    /// `proxy-redirect-*`, `proxy-cookie-*`).
    pub proxy_rewrites: Option<Box<super::proxy_rewrite::ProxyRewrites>>,
    /// nginx's `satisfy any` (ingress-nginx's `satisfy: any`): a client that passes the source
    /// ranges, basic authentication or external authentication is let in; the others' answer is
    /// the last check's.
    pub satisfy_any: bool,
    /// Each rewrite of the route is logged, as nginx's `rewrite_log on` (ingress-nginx's
    /// `enable-rewrite-log`).
    pub rewrite_log: bool,
    /// The route's canary has `affinity-canary-behavior: legacy`: requests its rules send to
    /// another backend than the route's own are balanced without a session cookie.
    pub legacy_canary: bool,
}

impl RouteLimits {
    /// Whether the source ranges alone decide who may send requests: unless `satisfy_any` lets an
    /// authenticated client in from anywhere.
    #[inline]
    pub fn sources_decide_alone(&self) -> bool {
        !(self.satisfy_any && (self.auth.is_some() || self.external_auth.is_some()))
    }
}

impl fmt::Display for RouteLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (name, list) in [("deny", &self.sources.deny), ("allow only", &self.sources.allow)] {
            if !list.is_empty() {
                let blocks: Vec<String> = list.iter().map(|b| b.to_string()).collect();
                parts.push(format!("{name} {}", blocks.join(" ")));
            }
        }
        if let Some(n) = self.max_body {
            parts.push(format!("body up to {n} bytes"));
        }
        for (name, value) in
            [("connect", self.connect_timeout), ("send", self.send_timeout), ("read", self.read_timeout)]
        {
            if let Some(d) = value {
                parts.push(format!("{name} timeout {}s", d.as_secs()));
            }
        }
        if let Some(clients) = &self.clients {
            parts.push(clients.to_string());
        }
        if let Some(affinity) = &self.affinity {
            parts.push(affinity.to_string());
        }
        if let Some(auth) = &self.auth {
            parts.push(auth.to_string());
        }
        if let Some(by) = &self.hash_by {
            parts.push(by.to_string());
        }
        if let Some(next) = &self.next_upstream {
            parts.push(next.to_string());
        }
        if let Some(pages) = &self.error_pages {
            parts.push(pages.to_string());
        }
        if let Some(auth) = &self.external_auth {
            parts.push(auth.to_string());
        }
        if self.ewma {
            parts.push("endpoints by response time (ewma)".into());
        }
        if let Some(auth) = &self.client_auth {
            parts.push(auth.to_string());
        }
        if let Some(edits) = &self.response_headers {
            parts.push(format!("response headers: {edits}"));
        }
        if self.unlogged {
            parts.push("not in the access log".into());
        }
        if let Some(rewrites) = &self.proxy_rewrites {
            parts.push(format!("rewrites {rewrites}"));
        }
        if self.satisfy_any {
            parts.push("satisfy any".into());
        }
        if self.rewrite_log {
            parts.push("rewrites logged".into());
        }
        if self.legacy_canary {
            parts.push("canary without sessions".into());
        }
        f.write_str(&parts.join(", "))
    }
}

/// The rules of one route, tried in order, and what applies to every request of the route
/// whichever rule decides.
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
pub struct RoutePolicy {
    pub rules: Box<[Rule]>,
    /// Filters for every request of the route (ingress-nginx's per-location rewrite and headers),
    /// applied before a rule's own.
    pub filters: Box<[Filter]>,
    pub limits: RouteLimits,
    /// The digest of everything above (backends by their digests), computed once: route items
    /// encode the policy as this.
    #[serde(skip)]
    pub digest: [u8; 32],
}

impl RoutePolicy {
    pub fn new(rules: Vec<Rule>) -> Self {
        Self::with_filters(rules, Vec::new())
    }

    /// Rules, and filters for every request of the route.
    pub fn with_filters(rules: Vec<Rule>, filters: Vec<Filter>) -> Self {
        Self::build(rules, filters, RouteLimits::default())
    }

    /// Rules, filters and limits for every request of the route.
    pub fn build(rules: Vec<Rule>, filters: Vec<Filter>, limits: RouteLimits) -> Self {
        let mut policy = RoutePolicy {
            rules: rules.into_boxed_slice(),
            filters: filters.into_boxed_slice(),
            limits,
            digest: [0; 32],
        };
        policy.digest = digest::digest_of(&policy).0;
        policy
    }

    /// As a part of another value's encoding: its digest.
    pub(crate) fn serialize_digest<S: serde::Serializer>(policy: &Self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&policy.digest)
    }

    /// The route's `app-root`, if it has one.
    #[inline]
    pub fn app_root(&self) -> Option<&str> {
        self.filters.iter().find_map(|f| match f {
            Filter::AppRoot(p) => Some(&**p),
            _ => None,
        })
    }

    /// The host every request of the route is redirected to, if any.
    #[inline]
    pub fn host_redirect(&self) -> Option<&str> {
        self.filters.iter().find_map(|f| match f {
            Filter::HostRedirect(h) => Some(&**h),
            _ => None,
        })
    }

    /// The route's rewrite, if it has one.
    #[inline]
    pub fn rewrite(&self) -> Option<&PathRewrite> {
        self.filters.iter().find_map(|f| match f {
            Filter::PathRewrite(r) => Some(r),
            _ => None,
        })
    }

    /// Every mirror of these rules, deduplicated, as `backend percent%` descriptions.
    pub fn mirrors(&self) -> Vec<String> {
        let mut out: Vec<String> = self.rules.iter().flat_map(|r| r.mirrors()).map(|m| m.to_string()).collect();
        out.sort();
        out.dedup();
        out
    }

    /// Every backend these rules can send to.
    pub fn backends(&self) -> impl Iterator<Item = &Arc<Backend>> {
        self.rules.iter().flat_map(|r| r.backends.iter().map(|b| &b.backend))
    }
}

impl Condition {
    /// Whether the request satisfies this condition.
    #[inline]
    pub fn holds(&self, req: &impl RequestView) -> bool {
        match self {
            Condition::Header { name, value } => req.header(name).is_some_and(|v| value.matches(v)),
            Condition::Cookie { name, value } => req.cookie(name).is_some_and(|v| value.matches(v)),
            Condition::Query { name, value } => find_pair(req.query(), b'&', name).is_some_and(|v| value.matches(v)),
            Condition::Method(m) => req.method() == m.as_bytes(),
            Condition::Path(value) => value.matches(req.path()),
            Condition::Tls(tls) => req.tls() == *tls,
            Condition::StickyTo { cookie, endpoints } => {
                req.cookie(cookie).and_then(crate::affinity::cookie_key).is_some_and(|key| endpoints.contains(&key))
            }
        }
    }
}
