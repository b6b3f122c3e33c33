//! The compiled route table: what a worker consults for every request.
//!
//! Lookup is one hash probe for the host (exact, then the single-label wildcard, then the any-host
//! rules) and, within the host, one probe for an Exact path followed by one probe per path element for
//! Prefix paths (longest first). The cost grows with the depth of the request path, never with the
//! number of routes or hosts. A host with regex paths (ingress-nginx's `use-regex`) first runs the
//! path through one DFA built from all its patterns (`regex_paths`): one pass over the path's
//! bytes, whatever the number of patterns; hosts without regex paths never touch it.
//!
//! Tables are immutable and built by [`TableBuilder`]; a builder given the previous table reuses every
//! host whose routes did not change (`Arc` sharing), so a new generation costs memory only for what
//! changed.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use rustc_hash::FxBuildHasher;
use serde::Serialize;

use crate::cert::CertId;
use crate::digest::{self, Digest};
use crate::upstream_tls::UpstreamTls;
use client_auth::ClientAuth;

pub mod affinity;
pub mod basic_auth;
pub mod client_auth;
pub mod client_limits;
pub mod cors;
pub mod error_pages;
pub mod external_auth;
pub mod filter;
pub mod hash_by;
pub mod htpasswd;
pub mod next_upstream;
pub mod policy;
pub mod proxy_rewrite;
mod regex_paths;
pub mod request;
pub mod rewrite;
pub mod source_ranges;
mod tls_ports;
pub use filter::{HeaderEdits, Redirect, Rewrite};
pub use policy::{
    Condition, Edits, Filter, Matcher, Mirror, RouteLimits, RoutePolicy, Rule, WeightedBackend, STICKY_COOKIE,
    STICKY_RANGE,
};
pub use regex_paths::check_regex_path;
pub use request::RequestView;
pub use rewrite::{PathRewrite, RewriteScratch};
pub use tls_ports::{TlsPort, TlsTarget};

type FxMap<K, V> = HashMap<K, V, FxBuildHasher>;

/// How a rule's path matches, as in the Ingress `pathType` (ImplementationSpecific compiles to Prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum PathKind {
    Exact,
    Prefix,
    /// ingress-nginx's regex location (`use-regex`): `~* "^<path>"`, case-insensitive. A host with
    /// regex paths is matched by them first, in ingress-nginx's order (see `regex_paths`).
    Regex,
}

/// Where a route sends requests.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct Backend {
    /// The backend's name: the static-routes key or `namespace/service:port` for Ingresses.
    pub name: Arc<str>,
    /// A small number stable for this name across generations, so workers can keep per-backend state
    /// (the round-robin cursor) in a vector instead of a map. Not in the digest: this process chose
    /// it in the order it met the names, so another replica serving the same table has other
    /// numbers, and the digest names a table across replicas.
    #[serde(skip)]
    pub slot: u32,
    pub kind: BackendKind,
    /// How ramjet talks to the endpoints.
    pub protocol: BackendProtocol,
    /// TLS to the endpoints: set exactly when the protocol is `HTTPS` or `GRPCS`.
    pub tls: Option<Arc<UpstreamTls>>,
    /// The digest of everything above, computed once: the items that name the backend encode it
    /// as this ([`Backend::serialize_digest`]), so a backend whose endpoints move changes the digest
    /// of every host that routes to it.
    #[serde(skip)]
    pub digest: Digest,
}

/// The protocol a backend's endpoints speak (`ramjet.dev/backend-protocol`, ingress-nginx's
/// `backend-protocol`, `protocol:` in static routes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum BackendProtocol {
    /// HTTP/1.1 over TCP (the default; ingress-nginx's `HTTP`).
    #[default]
    Http1,
    /// HTTP/2 by prior knowledge over TCP, one multiplexed connection per endpoint per worker.
    H2c,
    /// gRPC: HTTP/2 by prior knowledge over TCP, as [`BackendProtocol::H2c`].
    Grpc,
    /// HTTP/1.1 over TLS, pooled as HTTP/1.1 is.
    Https,
    /// gRPC over TLS: HTTP/2 (ALPN `h2`), one multiplexed connection per endpoint per worker.
    Grpcs,
}

impl BackendProtocol {
    /// Parses an annotation or field value (case-insensitive): `HTTP`, `H2C`, `GRPC`, `HTTPS`,
    /// `GRPCS`.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.to_ascii_uppercase().as_str() {
            "HTTP" => Ok(BackendProtocol::Http1),
            "H2C" => Ok(BackendProtocol::H2c),
            "GRPC" => Ok(BackendProtocol::Grpc),
            "HTTPS" => Ok(BackendProtocol::Https),
            "GRPCS" => Ok(BackendProtocol::Grpcs),
            _ => Err(format!("unknown backend protocol {value:?} (HTTP, HTTPS, H2C, GRPC or GRPCS)")),
        }
    }

    /// Whether requests go to the endpoints over HTTP/2.
    #[inline]
    pub fn is_h2(self) -> bool {
        matches!(self, BackendProtocol::H2c | BackendProtocol::Grpc | BackendProtocol::Grpcs)
    }

    /// Whether the endpoints are reached over TLS.
    #[inline]
    pub fn is_tls(self) -> bool {
        matches!(self, BackendProtocol::Https | BackendProtocol::Grpcs)
    }
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub enum BackendKind {
    /// Proxy to these addresses, round robin. Empty: answer 503.
    Endpoints(Box<[SocketAddr]>),
    /// Answer directly with a fixed response (the quickstart's backend, maintenance pages).
    Respond(DirectResponse),
}

/// A fixed response, with its head rendered at compile time so the worker only copies bytes.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct DirectResponse {
    pub status: u16,
    #[serde(serialize_with = "digest::as_bytes")]
    pub body: Bytes,
    /// Status line, `content-type` and `content-length`, each ending in CRLF; the worker appends the
    /// connection header and the blank line. In the digest: it carries fields beyond the status and
    /// body (a redirect's location).
    #[serde(serialize_with = "digest::as_bytes")]
    pub head: Bytes,
    /// Where in `head` the request's `<scheme>://<host name>` goes, for a redirect to a path that
    /// nginx makes absolute (`absolute_redirect on`, `port_in_redirect off`).
    pub request_origin_at: Option<u16>,
}

impl DirectResponse {
    /// A redirect: `status` (3xx) with `location: <location>` and no body. `location` must be a
    /// valid field value (visible ASCII); the compiler checks it.
    pub fn redirect(status: u16, location: &str) -> Self {
        let head =
            format!("HTTP/1.1 {status} {}\r\nlocation: {location}\r\ncontent-length: 0\r\n", reason_phrase(status));
        DirectResponse { status, body: Bytes::new(), head: Bytes::from(head), request_origin_at: None }
    }

    /// A redirect to `path` (starting with `/`) on the request's own scheme and host name, without
    /// its port or query: what nginx answers for `return <status> <path>` with ingress-nginx's
    /// `absolute_redirect on` and `port_in_redirect off`.
    pub fn redirect_on_request_host(status: u16, path: &str) -> Self {
        let mut response = Self::redirect(status, path);
        let at = response.head.windows(12).position(|w| w == b"\r\nlocation: ").map(|i| i + 12);
        response.request_origin_at = at.and_then(|i| u16::try_from(i).ok());
        response
    }

    /// Whether the answer's `location` begins with the request's scheme and host.
    #[inline]
    pub fn on_request_host(&self) -> Option<usize> {
        self.request_origin_at.map(usize::from)
    }

    /// `status` with a plain-text body.
    pub fn text(status: u16, body: impl Into<Bytes>) -> Self {
        let body = body.into();
        let head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n",
            status,
            reason_phrase(status),
            body.len()
        );
        DirectResponse { status, body, head: Bytes::from(head), request_origin_at: None }
    }
}

impl Backend {
    pub fn new(name: &str, slot: u32, kind: BackendKind) -> Self {
        Self::with_protocol(name, slot, kind, BackendProtocol::Http1)
    }

    pub fn with_protocol(name: &str, slot: u32, kind: BackendKind, protocol: BackendProtocol) -> Self {
        Self::with_tls(name, slot, kind, protocol, None)
    }

    /// A backend whose endpoints speak `protocol`, over `tls` when it is `HTTPS` or `GRPCS` (the
    /// compiler guarantees the two go together).
    pub fn with_tls(
        name: &str,
        slot: u32,
        kind: BackendKind,
        protocol: BackendProtocol,
        tls: Option<Arc<UpstreamTls>>,
    ) -> Self {
        let mut backend = Backend { name: name.into(), slot, kind, protocol, tls, digest: Digest::default() };
        backend.digest = digest::digest_of(&backend);
        backend
    }

    /// As a part of another value's encoding: its digest.
    pub(crate) fn serialize_digest<S: serde::Serializer>(backend: &Arc<Backend>, s: S) -> Result<S::Ok, S::Error> {
        backend.digest.serialize_bytes(s)
    }

    pub fn endpoints(name: &str, slot: u32, addrs: Vec<SocketAddr>) -> Self {
        Self::new(name, slot, BackendKind::Endpoints(addrs.into_boxed_slice()))
    }

    pub fn respond(name: &str, slot: u32, status: u16, body: impl Into<Bytes>) -> Self {
        Self::new(name, slot, BackendKind::Respond(DirectResponse::text(status, body)))
    }

    /// Number of endpoints (a direct response counts as one).
    pub fn endpoint_count(&self) -> usize {
        match &self.kind {
            BackendKind::Endpoints(e) => e.len(),
            BackendKind::Respond(_) => 1,
        }
    }
}

/// The reason phrase for the statuses a proxy writes; anything else gets a generic phrase.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => match status / 100 {
            1 => "Informational",
            2 => "Success",
            3 => "Redirection",
            4 => "Client Error",
            _ => "Server Error",
        },
    }
}

/// One compiled path's target: its backend, and optionally a [`RoutePolicy`] (conditions,
/// weighted backends, filters) that can send a request elsewhere.
#[derive(Debug)]
pub struct Route {
    /// Where a request goes when the route has no policy, or no rule of its policy holds.
    pub backend: Arc<Backend>,
    pub policy: Option<Arc<RoutePolicy>>,
    /// The object that declared the route (`static-routes[3]`, `namespace/ingress`): for diagnostics,
    /// the admin API and the metrics' labels, not part of the digest.
    pub source: Arc<str>,
    /// The kind of that object.
    pub origin: RouteOrigin,
}

/// The kind of object that declared a route (the metrics' `route_kind` label).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteOrigin {
    /// The routes file (or a test's table).
    #[default]
    Static,
    Ingress,
    HttpRoute,
    GrpcRoute,
}

impl RouteOrigin {
    pub fn label(self) -> &'static str {
        match self {
            RouteOrigin::Static => "static",
            RouteOrigin::Ingress => "ingress",
            RouteOrigin::HttpRoute => "httproute",
            RouteOrigin::GrpcRoute => "grpcroute",
        }
    }
}

/// The namespace and name of the object that declared a route (`namespace/name`), and the Service
/// of its backend (`namespace/service:port`); `None` for a static route, which has neither.
pub fn route_object<'a>(
    origin: RouteOrigin,
    route: &'a str,
    backend: &'a str,
) -> Option<(&'a str, &'a str, Option<&'a str>)> {
    if origin == RouteOrigin::Static {
        return None;
    }
    let (namespace, name) = route.split_once('/').unwrap_or(("", route));
    let service = backend.split_once('/').map(|(_, rest)| rest.rsplit_once(':').map_or(rest, |(svc, _)| svc));
    Some((namespace, name, service))
}

/// Who declared a route: the kind and name of the object. A bare `&str` is a static route's name.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub origin: RouteOrigin,
    pub name: &'a str,
}

impl<'a> From<&'a str> for Source<'a> {
    fn from(name: &'a str) -> Self {
        Source { origin: RouteOrigin::Static, name }
    }
}

/// What [`Route::pick`] chose for one request.
#[derive(Debug)]
pub struct Pick<'r> {
    pub backend: &'r Arc<Backend>,
    /// The rule that decided, if one did.
    pub rule: Option<&'r Rule>,
    /// The filters that apply: the rule's, or the picked backend's own merged with them.
    pub filters: &'r [Filter],
    /// A sticky rule drew a new number for this user: send it back in the [`STICKY_COOKIE`].
    pub new_sticky: Option<u32>,
}

impl Route {
    /// The backend for one request: without a policy, the route's backend; otherwise the first rule
    /// whose conditions hold picks by weight with `random` (uniform `u32`s from the worker's own
    /// generator), and when none holds the route's backend serves.
    #[inline]
    pub fn pick<'r>(&'r self, req: &impl RequestView, random: &mut impl FnMut() -> u32) -> Pick<'r> {
        let Some(policy) = &self.policy else {
            return Pick { backend: &self.backend, rule: None, filters: &[], new_sticky: None };
        };
        for rule in policy.rules.iter() {
            if !rule.conditions.iter().all(|c| c.holds(req)) {
                continue;
            }
            if let [only] = &rule.backends[..] {
                return Pick {
                    backend: &only.backend,
                    rule: Some(rule),
                    filters: rule.filters_for(only),
                    new_sticky: None,
                };
            }
            let (draw, new_sticky) = if rule.sticky {
                let kept = req
                    .cookie(STICKY_COOKIE)
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.parse::<u32>().ok())
                    .filter(|v| *v < STICKY_RANGE);
                let (bucket, new) = match kept {
                    Some(b) => (b, None),
                    None => {
                        let b = scale(random(), STICKY_RANGE);
                        (b, Some(b))
                    }
                };
                ((bucket as u64 * rule.total as u64 / STICKY_RANGE as u64) as u32, new)
            } else {
                (scale(random(), rule.total), None)
            };
            let picked = rule.pick(draw);
            return Pick { backend: &picked.backend, rule: Some(rule), filters: rule.filters_for(picked), new_sticky };
        }
        Pick { backend: &self.backend, rule: None, filters: &[], new_sticky: None }
    }
}

/// A uniform `u32` scaled to `0..n` (multiply and shift: no division, bias below 2^-32 · n).
#[inline]
fn scale(random: u32, n: u32) -> u32 {
    ((random as u64 * n as u64) >> 32) as u32
}

/// Identity of a route in the table, for diffs: host as declared (`""` for any host), path kind, and
/// path as compiled (Prefix paths without their trailing `/`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteKey {
    pub host: Arc<str>,
    pub kind: PathKind,
    pub path: Arc<str>,
}

impl fmt::Display for RouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.is_empty() { "*" } else { &self.host };
        let path = if self.path.is_empty() { "/" } else { &self.path };
        let kind = match self.kind {
            PathKind::Exact => "=",
            PathKind::Prefix => "",
            PathKind::Regex => "~",
        };
        write!(f, "{host}{kind}{path}")
    }
}

/// Every rule of one host (or of the any-host group).
#[derive(Debug)]
pub struct HostRoutes {
    /// The host as declared: `example.com`, `*.example.com`, or `""` for rules without a host.
    pub host: Arc<str>,
    exact: FxMap<Arc<str>, Arc<Route>>,
    /// Keys are Prefix paths without a trailing `/` (so the root prefix is `""`).
    prefix: FxMap<Arc<str>, Arc<Route>>,
    /// Regex paths as written, and the automaton that matches them all at once.
    regex: FxMap<Arc<str>, Arc<Route>>,
    regex_paths: Option<regex_paths::RegexPaths>,
    digest: Digest,
}

impl HostRoutes {
    /// The first regex path in ingress-nginx's order, then an Exact match, then the longest Prefix
    /// match by whole path elements.
    #[inline]
    pub fn route(&self, path: &str) -> Option<&Arc<Route>> {
        if let Some(regex) = &self.regex_paths {
            if let Some(r) = regex.find(path) {
                return Some(r);
            }
        }
        if !self.exact.is_empty() {
            if let Some(r) = self.exact.get(path) {
                return Some(r);
            }
        }
        if self.prefix.is_empty() {
            return None;
        }
        // `/foo/` matches like `/foo`; then cut one element at a time: `/a/b` → `/a` → ``.
        let mut candidate = path.trim_end_matches('/');
        loop {
            if let Some(r) = self.prefix.get(candidate) {
                return Some(r);
            }
            match candidate.rfind('/') {
                Some(i) => candidate = &candidate[..i],
                None => return None,
            }
        }
    }

    pub fn len(&self) -> usize {
        self.exact.len() + self.prefix.len() + self.regex.len()
    }

    /// SHA-256 over this host's rules and backends.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every rule of this host in canonical order (Exact paths, then Prefix paths, then regex
    /// paths, each sorted): the items [`HostRoutes::digest`] is taken over.
    pub fn items(&self) -> Vec<TableItem<'_>> {
        let mut items = Vec::with_capacity(self.len());
        for (kind, map) in
            [(PathKind::Exact, &self.exact), (PathKind::Prefix, &self.prefix), (PathKind::Regex, &self.regex)]
        {
            let start = items.len();
            items.extend(map.iter().map(|(path, route)| TableItem::Route {
                host: &self.host,
                kind,
                path,
                backend: &route.backend,
                policy: route.policy.as_deref(),
            }));
            items[start..].sort_unstable_by(|a, b| a.route_path().cmp(b.route_path()));
        }
        items
    }

    /// Every route of this host with its key, in no particular order.
    pub fn routes(&self) -> impl Iterator<Item = (RouteKey, &Arc<Route>)> + '_ {
        let exact = self.exact.iter().map(|(p, r)| (PathKind::Exact, p, r));
        let prefix = self.prefix.iter().map(|(p, r)| (PathKind::Prefix, p, r));
        let regex = self.regex.iter().map(|(p, r)| (PathKind::Regex, p, r));
        exact
            .chain(prefix)
            .chain(regex)
            .map(move |(kind, path, route)| (RouteKey { host: self.host.clone(), kind, path: path.clone() }, route))
    }
}

/// What an HTTPS redirect's `location` does with a request target that ends in `/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum TrailingSlash {
    /// Drops that one `/` (`/` itself leaves nothing after the host), as ingress-nginx does
    /// unless `preserve-trailing-slash`.
    Drop,
    /// Keeps the target as it came.
    Keep,
}

/// Where an ACME server looks for an HTTP-01 challenge's answer: never redirected to HTTPS.
pub const ACME_CHALLENGE: &str = "/.well-known/acme-challenge/";

/// The immutable, compiled routing table of one generation.
#[derive(Debug, Default)]
pub struct RouteTable {
    exact_hosts: FxMap<Arc<str>, Arc<HostRoutes>>,
    /// Keyed by the suffix after `*.`: `*.example.com` is stored as `example.com`.
    wildcard_hosts: FxMap<Arc<str>, Arc<HostRoutes>>,
    /// Wildcards that match any number of labels (`**.example.com`, a Gateway API `*.example.com`:
    /// `a.b.example.com` too), keyed by the suffix after `**.`.
    deep_wildcard_hosts: FxMap<Arc<str>, Arc<HostRoutes>>,
    any_host: Option<Arc<HostRoutes>>,
    default_route: Option<Arc<Route>>,
    /// TLS certificate per host as declared (exact, `*.` or `**.` wildcard, `""` for any name).
    tls: BTreeMap<Arc<str>, CertId>,
    /// Whether `tls` has a `**.` wildcard (only then are an SNI name's further suffixes looked up).
    deep_tls: bool,
    /// Hosts whose plain-HTTP requests are redirected to HTTPS; wildcards by their suffix.
    /// Each host's [`TrailingSlash`] in the `location`.
    ssl_redirect: FxMap<Arc<str>, TrailingSlash>,
    ssl_redirect_wildcard: FxMap<Arc<str>, TrailingSlash>,
    /// The same hosts as declared (`*.` for a wildcard), sorted: for [`RouteTable::items`].
    ssl_redirect_hosts: Box<[(Arc<str>, TrailingSlash)]>,
    /// Hosts whose TLS connections are passed to a backend unopened (ingress-nginx's
    /// `ssl-passthrough`, Gateway API TLSRoutes), by server name as declared, lower case: exact, or
    /// a wildcard (`*.`, `**.`), or `""` for any name.
    passthrough: BTreeMap<Arc<str>, Arc<TlsTarget>>,
    /// Hosts whose TLS handshakes ask for a client certificate, by server name as declared (exact
    /// or `*.` wildcard), as `tls` is looked up.
    client_auth: BTreeMap<Arc<str>, Arc<ClientAuth>>,
    /// `Strict-Transport-Security` for HTTPS answers of hosts with a certificate of their own.
    hsts: Option<Arc<str>>,
    /// Paths never redirected to HTTPS besides [`ACME_CHALLENGE`] (ingress-nginx's
    /// `no-tls-redirect-locations`), as prefixes of the request's path.
    no_tls_redirect: Box<[Box<str>]>,
    /// Requests no rule matches (the default backend's, or a 404) leave no access-log record
    /// (ingress-nginx's `enable-access-log-for-default-backend: "false"`).
    unlogged_unmatched: bool,
    /// TCP and UDP routes by the port ramjet listens on for them: each port's connections (flows)
    /// are relayed to the route's backends. The ports are the sockets the data plane opens for
    /// this table.
    ports: BTreeMap<(Transport, u16), Arc<PortRoute>>,
    /// TLS route ports (a Gateway TLS listener on a port of its own): each port's connections are
    /// passed through or terminated by server name, then relayed to the name's backends.
    tls_ports: BTreeMap<u16, Arc<TlsPort>>,
    digest: Digest,
    /// The digest of the table items alone ([`RouteTable::table_items`]): equal digests, equal
    /// items, so a diff can skip them.
    items_digest: Digest,
}

impl RouteTable {
    /// The route for a request: the host header (any case, with or without `:port`) and the request
    /// target (origin form; a `?query` is ignored). Falls back to the default backend; `None` is a 404.
    #[inline]
    pub fn route(&self, host: &str, target: &str) -> Option<&Arc<Route>> {
        let path = match target.find('?') {
            Some(i) => &target[..i],
            None => target,
        };
        let mut buf = [0u8; 256];
        let found = match normalize_host(host, &mut buf) {
            Some(h) => self.host_routes(h).and_then(|hr| hr.route(path)),
            None => self.any_host.as_ref().and_then(|hr| hr.route(path)),
        };
        found.or(self.default_route.as_ref())
    }

    /// The rules that apply to a normalized host: exact, then wildcard, then the any-host rules.
    /// A request belongs to the most specific host that has rules; it does not fall through to a less
    /// specific host when no path matches (that is the default backend's job).
    #[inline]
    pub fn host_routes(&self, host: &str) -> Option<&Arc<HostRoutes>> {
        if let Some(hr) = self.exact_hosts.get(host) {
            return Some(hr);
        }
        if !self.wildcard_hosts.is_empty() || !self.deep_wildcard_hosts.is_empty() {
            if let Some((label, suffix)) = host.split_once('.') {
                if !label.is_empty() {
                    if let Some(hr) = self.wildcard_hosts.get(suffix) {
                        return Some(hr);
                    }
                    if !self.deep_wildcard_hosts.is_empty() {
                        return self.deep_wildcard(suffix).or(self.any_host.as_ref());
                    }
                }
            }
        }
        self.any_host.as_ref()
    }

    /// The any-depth wildcard with the longest suffix of `suffix` (itself included).
    #[cold]
    fn deep_wildcard(&self, mut suffix: &str) -> Option<&Arc<HostRoutes>> {
        loop {
            if let Some(hr) = self.deep_wildcard_hosts.get(suffix) {
                return Some(hr);
            }
            suffix = suffix.split_once('.')?.1;
        }
    }

    /// The certificate for an SNI name (normalized, lower case): exact host, then the wildcard one
    /// label up, then any-depth wildcards (longest suffix first), then the one for any name.
    pub fn certificate_for(&self, sni: &str) -> Option<CertId> {
        by_server_name(&self.tls, self.deep_tls, sni).copied()
    }

    /// The `Strict-Transport-Security` value HTTPS answers carry, for hosts with a certificate of
    /// their own (not the default one).
    #[inline]
    pub fn hsts(&self) -> Option<&str> {
        self.hsts.as_deref()
    }

    /// Whether a server name (normalized) has a certificate of its own: exact or wildcard, not the
    /// one for any name (a default certificate).
    pub fn has_own_certificate(&self, sni: &str) -> bool {
        by_name(&self.tls, self.deep_tls, sni).is_some()
    }

    /// Whether any host asks TLS clients for a certificate.
    #[inline]
    pub fn has_client_auth(&self) -> bool {
        !self.client_auth.is_empty()
    }

    /// The client-certificate authentication of the host an SNI name (normalized, lower case; `""`
    /// for none) reaches, looked up as [`RouteTable::certificate_for`] looks up certificates.
    pub fn client_auth_for(&self, sni: &str) -> Option<&Arc<ClientAuth>> {
        by_server_name(&self.client_auth, true, sni)
    }

    /// The certificate for any server name (a Gateway listener without a hostname), also for
    /// clients that send no SNI.
    pub fn any_certificate(&self) -> Option<CertId> {
        self.tls.get("").copied()
    }

    /// Whether a plain-HTTP request for this normalized host and target is redirected to HTTPS: the
    /// host redirects, and the target is not an ACME HTTP-01 challenge (cert-manager's solver is
    /// answered over plain HTTP, as ingress-nginx's `no-tls-redirect-locations` default does).
    #[inline]
    pub fn redirects_request_to_https(&self, host: &str, target: &str) -> bool {
        self.https_redirect(host, target).is_some()
    }

    /// How a plain-HTTP request for this normalized host and target is redirected to HTTPS, if it
    /// is ([`RouteTable::redirects_request_to_https`]).
    #[inline]
    pub fn https_redirect(&self, host: &str, target: &str) -> Option<TrailingSlash> {
        self.https_redirect_of(host).filter(|_| {
            !target.starts_with(ACME_CHALLENGE) && !self.no_tls_redirect.iter().any(|p| target.starts_with(&**p))
        })
    }

    /// Whether plain-HTTP requests for this normalized host are redirected to HTTPS.
    #[inline]
    pub fn redirects_to_https(&self, host: &str) -> bool {
        self.https_redirect_of(host).is_some()
    }

    #[inline]
    fn https_redirect_of(&self, host: &str) -> Option<TrailingSlash> {
        self.ssl_redirect.get(host).copied().or_else(|| {
            let (label, suffix) = host.split_once('.')?;
            self.ssl_redirect_wildcard.get(suffix).copied().filter(|_| !label.is_empty())
        })
    }

    /// Whether any host redirects to HTTPS (so the common case skips the host normalization).
    #[inline]
    pub fn has_passthrough(&self) -> bool {
        !self.passthrough.is_empty()
    }

    /// What TLS connections for this server name get instead of HTTPS, if anything (passed through
    /// unopened, or terminated and relayed as bytes, to weighted backends): the exact name, then
    /// wildcards (one label, then any depth); the entry for any name (a Gateway TLS listener and
    /// TLSRoute without hostnames) only for names without a certificate of their own, which are
    /// terminated as their HTTPS listeners or Ingresses ask.
    pub fn passthrough(&self, server_name: &str) -> Option<&Arc<TlsTarget>> {
        let mut buf = [0u8; 256];
        let name = normalize_host(server_name, &mut buf)?;
        by_name(&self.passthrough, true, name)
            .or_else(|| self.passthrough.get("").filter(|_| !self.has_own_certificate(name)))
    }

    /// The route of a TCP or UDP port, if the table has one.
    pub fn port_route(&self, transport: Transport, port: u16) -> Option<&Arc<PortRoute>> {
        self.ports.get(&(transport, port))
    }

    /// The server names of a TLS route port, if the table has the port.
    pub fn tls_port(&self, port: u16) -> Option<&Arc<TlsPort>> {
        self.tls_ports.get(&port)
    }

    /// The ports of the TCP, UDP and TLS routes: the sockets this table needs beside HTTP and HTTPS.
    pub fn route_ports(&self) -> impl Iterator<Item = (Transport, u16)> + '_ {
        self.ports.keys().copied().chain(self.tls_ports.keys().map(|&port| (Transport::Tls, port)))
    }

    pub fn has_ssl_redirects(&self) -> bool {
        !self.ssl_redirect.is_empty() || !self.ssl_redirect_wildcard.is_empty()
    }

    pub fn default_route(&self) -> Option<&Arc<Route>> {
        self.default_route.as_ref()
    }

    /// Whether requests no rule matches leave no access-log record.
    pub fn unlogged_unmatched(&self) -> bool {
        self.unlogged_unmatched
    }

    /// Every host group (exact, wildcard, any-host).
    pub fn hosts(&self) -> impl Iterator<Item = &Arc<HostRoutes>> {
        let wildcards = self.wildcard_hosts.values().chain(self.deep_wildcard_hosts.values());
        self.exact_hosts.values().chain(wildcards).chain(self.any_host.iter())
    }

    pub fn tls_hosts(&self) -> &BTreeMap<Arc<str>, CertId> {
        &self.tls
    }

    pub fn route_count(&self) -> usize {
        self.hosts().map(|h| h.len()).sum()
    }

    /// Number of distinct named hosts (rules without a host are not a host).
    pub fn host_count(&self) -> usize {
        self.exact_hosts.len() + self.wildcard_hosts.len() + self.deep_wildcard_hosts.len()
    }

    /// Distinct certificates referenced by this table.
    pub fn cert_ids(&self) -> Vec<CertId> {
        let mut ids: Vec<CertId> = self.tls.values().copied().collect();
        ids.extend(self.tls_ports.values().flat_map(|port| port.certificates()));
        ids.extend(self.passthrough.values().filter_map(|target| target.terminate));
        ids.sort();
        ids.dedup();
        ids
    }

    /// SHA-256 over the compiled content — every [`TableItem`] of [`RouteTable::items`]: hosts,
    /// routes, backends (names, endpoints, direct responses), TLS, HTTPS redirects and the default
    /// backend. Equal digests mean the data plane would behave identically.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// The digest of the items outside host groups: default backend, TLS hosts, HTTPS redirects,
    /// passthrough hosts.
    pub fn items_digest(&self) -> Digest {
        self.items_digest
    }

    /// Every host group, sorted by host as declared (the any-host group, `""`, first).
    pub fn groups_sorted(&self) -> Vec<&Arc<HostRoutes>> {
        let mut groups: Vec<&Arc<HostRoutes>> = self.hosts().collect();
        groups.sort_unstable_by(|a, b| a.host.cmp(&b.host));
        groups
    }

    /// The items outside the host groups, in canonical order: the default backend, TLS hosts, then
    /// HTTPS redirects.
    pub fn table_items(&self) -> Vec<TableItem<'_>> {
        let mut items = Vec::with_capacity(1 + self.tls.len() + self.ssl_redirect_hosts.len());
        items.extend(self.default_route.as_ref().map(|r| TableItem::DefaultBackend(&r.backend)));
        items.extend(self.tls.iter().map(|(host, cert)| TableItem::Tls { host, cert: *cert }));
        items.extend(
            self.ssl_redirect_hosts
                .iter()
                .map(|(host, slash)| TableItem::HttpsRedirect { host, trailing_slash: *slash }),
        );
        items.extend(self.passthrough.iter().map(|(host, target)| TableItem::Passthrough { host, target }));
        items.extend(self.client_auth.iter().map(|(host, auth)| TableItem::ClientAuth { host, auth }));
        items.extend(self.hsts.as_ref().map(TableItem::Hsts));
        if !self.no_tls_redirect.is_empty() {
            items.push(TableItem::NoTlsRedirect(&self.no_tls_redirect));
        }
        if self.unlogged_unmatched {
            items.push(TableItem::UnloggedUnmatched);
        }
        items.extend(self.ports.iter().map(|(&(transport, port), route)| TableItem::PortRoute {
            transport,
            port,
            route,
        }));
        for (&port, names) in &self.tls_ports {
            items.extend(names.names().map(|(host, target)| TableItem::TlsPortName { port, host, target }));
        }
        items
    }

    /// The whole table as canonical items: every host group's routes (hosts sorted), then
    /// [`RouteTable::table_items`]. This is what the digest is taken over and what the audit diff
    /// compares, so a table whose digest changed always has an item that changed.
    pub fn items(&self) -> Vec<TableItem<'_>> {
        let mut items: Vec<TableItem<'_>> = self.groups_sorted().into_iter().flat_map(|g| g.items()).collect();
        items.extend(self.table_items());
        items
    }

    /// The digest computed again from [`RouteTable::items`]; always equal to [`RouteTable::digest`]
    /// (which [`TableBuilder::build`] computes from the same items while building).
    pub fn recompute_digest(&self) -> Digest {
        let groups: Vec<Digest> = self.groups_sorted().into_iter().map(|g| group_digest(&g.host, &g.items())).collect();
        table_digest(&groups, &self.table_items())
    }
}

/// What `map` holds for a server name: the exact name, then the wildcard one label up, then
/// any-depth wildcards (longest suffix first, only when `deep`), then the entry for any name (`""`).
pub(crate) fn by_server_name<'m, V>(map: &'m BTreeMap<Arc<str>, V>, deep: bool, name: &str) -> Option<&'m V> {
    by_name(map, deep, name).or_else(|| map.get(""))
}

/// [`by_server_name`] without the entry for any name.
fn by_name<'m, V>(map: &'m BTreeMap<Arc<str>, V>, deep: bool, name: &str) -> Option<&'m V> {
    if let Some(found) = map.get(name) {
        return Some(found);
    }
    let wildcard = || {
        let (label, mut suffix) = name.split_once('.')?;
        if label.is_empty() {
            return None;
        }
        let mut wildcard = String::with_capacity(suffix.len() + 3);
        wildcard.push_str("*.");
        wildcard.push_str(suffix);
        if let Some(found) = map.get(wildcard.as_str()) {
            return Some(found);
        }
        if !deep {
            return None;
        }
        loop {
            wildcard.clear();
            wildcard.push_str("**.");
            wildcard.push_str(suffix);
            if let Some(found) = map.get(wildcard.as_str()) {
                return Some(found);
            }
            suffix = suffix.split_once('.')?.1;
        }
    };
    wildcard()
}

/// One entry of a compiled table in canonical form. The digest encodes exactly these (their
/// derived `Serialize`, see [`crate::digest`]) and the audit diff compares exactly these, so the two
/// cannot disagree about what a table contains. Backends and policies are encoded as their own
/// digests, computed once when they are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TableItem<'a> {
    /// A rule: host as declared (`""` for any host), path kind, path as compiled, its backend and
    /// its policy (conditions, weighted backends, mirrors), if any.
    Route {
        host: &'a Arc<str>,
        kind: PathKind,
        path: &'a Arc<str>,
        #[serde(serialize_with = "Backend::serialize_digest")]
        backend: &'a Arc<Backend>,
        #[serde(serialize_with = "policy_digest")]
        policy: Option<&'a RoutePolicy>,
    },
    /// Where requests that match no rule go.
    DefaultBackend(#[serde(serialize_with = "Backend::serialize_digest")] &'a Arc<Backend>),
    /// A host (exact or `*.` wildcard) served with this certificate.
    Tls { host: &'a Arc<str>, cert: CertId },
    /// A host (exact or `*.` wildcard) whose plain-HTTP requests are redirected to HTTPS.
    HttpsRedirect { host: &'a Arc<str>, trailing_slash: TrailingSlash },
    /// A server name whose TLS connections on the HTTPS port are not HTTPS: passed through, or
    /// terminated and relayed, to the target's backends.
    Passthrough { host: &'a Arc<str>, target: &'a TlsTarget },
    /// A host (exact or `*.` wildcard) whose TLS clients are asked for a certificate.
    ClientAuth { host: &'a Arc<str>, auth: &'a ClientAuth },
    /// The `Strict-Transport-Security` value of HTTPS answers.
    Hsts(&'a Arc<str>),
    /// Paths never redirected to HTTPS (besides the ACME challenge's), when there are any.
    NoTlsRedirect(&'a [Box<str>]),
    /// Requests no rule matches are not logged.
    UnloggedUnmatched,
    /// A port whose TCP connections (UDP flows) are relayed to the route's backends.
    PortRoute { transport: Transport, port: u16, route: &'a PortRoute },
    /// A server name of a TLS route port: passed through or terminated, then relayed.
    TlsPortName { port: u16, host: &'a Arc<str>, target: &'a TlsTarget },
}

/// The transport of a port route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Transport {
    Tcp,
    Udp,
    /// TCP connections that start with a TLS ClientHello, routed by its server name.
    Tls,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::Tls => "tls",
        })
    }
}

/// Connections (TCP) or flows (UDP) to a port, relayed as they are (Layer 4) to backends split by
/// weight: a Gateway API TCPRoute or UDPRoute, a static routes file's `tcp:` or `udp:` entry.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct PortRoute {
    /// The weighted backends (no conditions, no filters): [`Rule::pick`] chooses per connection.
    pub rule: Rule,
    /// Where it came from (`namespace/name` of a TCPRoute, the file), for diagnostics and the audit.
    pub source: Arc<str>,
}

impl PortRoute {
    pub fn new(backends: Vec<WeightedBackend>, source: &str) -> Self {
        let total = backends.iter().map(|b| b.weight).sum();
        PortRoute { rule: Rule::split(Vec::new(), backends, total, false), source: source.into() }
    }
}

impl fmt::Display for PortRoute {
    /// `ns/db:5432 ×3, ns/db-replica:5432 ×1 (from shop/db)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backends: Vec<String> =
            self.rule.backends.iter().map(|b| format!("{} ×{}", b.backend.name, b.weight)).collect();
        write!(f, "{} (from {})", backends.join(", "), self.source)
    }
}

/// A route item's policy, by its digest.
fn policy_digest<S: serde::Serializer>(policy: &Option<&RoutePolicy>, s: S) -> Result<S::Ok, S::Error> {
    struct ByDigest<'p>(&'p RoutePolicy);
    impl Serialize for ByDigest<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            RoutePolicy::serialize_digest(self.0, s)
        }
    }
    policy.map(ByDigest).serialize(s)
}

impl TableItem<'_> {
    fn route_path(&self) -> &str {
        match self {
            TableItem::Route { path, .. } => path,
            _ => "",
        }
    }

    /// The route's key, for route items.
    pub fn route_key(&self) -> Option<RouteKey> {
        match self {
            TableItem::Route { host, kind, path, .. } => {
                Some(RouteKey { host: (*host).clone(), kind: *kind, path: (*path).clone() })
            }
            _ => None,
        }
    }
}

/// The digest of one host group: its host, then its route items in canonical order.
fn group_digest(host: &str, items: &[TableItem<'_>]) -> Digest {
    digest::digest_of(&(host, items))
}

/// The table digest: the group digests in host order, then the items outside host groups.
fn table_digest(groups: &[Digest], items: &[TableItem<'_>]) -> Digest {
    struct Groups<'g>(&'g [Digest]);
    impl Serialize for Groups<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.0.iter().map(|d| ByteString(&d.0)))
        }
    }
    struct ByteString<'b>(&'b [u8]);
    impl Serialize for ByteString<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }
    digest::digest_of(&(Groups(groups), items))
}

/// Lower-cases a Host header or SNI value into `buf`, dropping a `:port` and a trailing dot.
/// `None` when it is empty, too long, or not ASCII.
#[inline]
pub fn normalize_host<'b>(raw: &str, buf: &'b mut [u8; 256]) -> Option<&'b str> {
    let raw = raw.as_bytes();
    let host = if raw.first() == Some(&b'[') {
        // IPv6 literal: keep the brackets, drop the port.
        let end = raw.iter().position(|&b| b == b']')?;
        &raw[..=end]
    } else {
        match raw.iter().rposition(|&b| b == b':') {
            Some(i) => &raw[..i],
            None => raw,
        }
    };
    let host = host.strip_suffix(b".").unwrap_or(host);
    if host.is_empty() || host.len() > buf.len() || !host.is_ascii() {
        return None;
    }
    let out = &mut buf[..host.len()];
    for (o, b) in out.iter_mut().zip(host) {
        *o = b.to_ascii_lowercase();
    }
    std::str::from_utf8(out).ok()
}

/// Two rules claim the same host, path and path kind for different backends; the first one added wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConflict {
    pub key: RouteKey,
    /// Who holds the route.
    pub kept: Arc<str>,
}

#[derive(Default)]
struct HostDraft {
    exact: BTreeMap<Arc<str>, Arc<Route>>,
    prefix: BTreeMap<Arc<str>, Arc<Route>>,
    regex: BTreeMap<Arc<str>, Arc<Route>>,
}

impl HostDraft {
    /// The digest of the group this draft builds: the same items, in the same order, as
    /// `HostRoutes::items` walks in the built group.
    fn digest(&self, host: &Arc<str>) -> Digest {
        let maps = [(PathKind::Exact, &self.exact), (PathKind::Prefix, &self.prefix), (PathKind::Regex, &self.regex)];
        let items: Vec<TableItem<'_>> = maps
            .into_iter()
            .flat_map(|(kind, map)| {
                map.iter().map(move |(path, route)| TableItem::Route {
                    host,
                    kind,
                    path,
                    backend: &route.backend,
                    policy: route.policy.as_deref(),
                })
            })
            .collect();
        group_digest(host, &items)
    }
}

/// A host whose regex paths could not be compiled together; they are left out of its table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexHostProblem {
    pub host: Arc<str>,
    /// The routes' sources (`namespace/ingress`), each once.
    pub sources: Vec<Arc<str>>,
    pub message: String,
}

/// Collects rules, then builds an immutable [`RouteTable`]. Hosts are given as declared (lower case,
/// `*.` for a wildcard one label deep as Ingress has them, `**.` for one of any depth as Gateway
/// API has them, `""` for any host); the compilers validate them before they get here.
#[derive(Default)]
pub struct TableBuilder {
    hosts: BTreeMap<Arc<str>, HostDraft>,
    default_route: Option<Arc<Route>>,
    tls: BTreeMap<Arc<str>, CertId>,
    ssl_redirect: Vec<(Arc<str>, TrailingSlash)>,
    passthrough: BTreeMap<Arc<str>, Arc<TlsTarget>>,
    client_auth: BTreeMap<Arc<str>, Arc<ClientAuth>>,
    hsts: Option<Arc<str>>,
    no_tls_redirect: Vec<Box<str>>,
    unlogged_unmatched: bool,
    ports: BTreeMap<(Transport, u16), Arc<PortRoute>>,
    tls_ports: BTreeMap<u16, TlsPort>,
}

impl TableBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule. A Prefix path's trailing `/` is not significant (`/foo/` is `/foo`). A second rule
    /// with the same key and the same backend merges silently; with another backend it is refused and
    /// the first stays (the caller adds rules in precedence order).
    pub fn add_route(
        &mut self,
        host: &str,
        path: &str,
        kind: PathKind,
        backend: Arc<Backend>,
        source: &str,
    ) -> Result<(), RouteConflict> {
        self.add_route_with_policy(host, path, kind, backend, None, source)
    }

    /// [`TableBuilder::add_route`] with a policy: conditions, weighted backends and filters that
    /// apply before the route's own backend. Merging is the same: same backend and same policy merge,
    /// anything else is a conflict.
    pub fn add_route_with_policy<'a>(
        &mut self,
        host: &str,
        path: &str,
        kind: PathKind,
        backend: Arc<Backend>,
        policy: Option<Arc<RoutePolicy>>,
        source: impl Into<Source<'a>>,
    ) -> Result<(), RouteConflict> {
        let source = source.into();
        let lower;
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            lower = host.to_ascii_lowercase();
            &lower
        } else {
            host
        };
        let path: Arc<str> = match kind {
            PathKind::Exact | PathKind::Regex => path.into(),
            PathKind::Prefix => path.trim_end_matches('/').into(),
        };
        if !self.hosts.contains_key(host) {
            self.hosts.insert(host.into(), HostDraft::default());
        }
        let draft = self.hosts.get_mut(host).expect("inserted above");
        let map = match kind {
            PathKind::Exact => &mut draft.exact,
            PathKind::Prefix => &mut draft.prefix,
            PathKind::Regex => &mut draft.regex,
        };
        if let Some(existing) = map.get(&path) {
            if existing.backend == backend && existing.policy == policy {
                return Ok(());
            }
            return Err(RouteConflict {
                key: RouteKey { host: host.into(), kind, path },
                kept: existing.source.clone(),
            });
        }
        map.insert(path, Arc::new(Route { backend, policy, source: source.name.into(), origin: source.origin }));
        Ok(())
    }

    /// The backend for requests that match no rule (without one they get 404).
    pub fn set_default_backend<'a>(&mut self, backend: Arc<Backend>, source: impl Into<Source<'a>>) {
        let source = source.into();
        let route = Route { backend, policy: None, source: source.name.into(), origin: source.origin };
        self.default_route = Some(Arc::new(route));
    }

    pub fn has_default_backend(&self) -> bool {
        self.default_route.is_some()
    }

    /// Serve `host` (exact or `*.` wildcard) with this certificate; the first one given for a host wins.
    pub fn add_tls_host(&mut self, host: &str, cert: CertId) -> bool {
        let host: Arc<str> = host.to_ascii_lowercase().into();
        if self.tls.contains_key(&host) {
            return false;
        }
        self.tls.insert(host, cert);
        true
    }

    /// On the HTTPS port, TLS connections for the server name `host` go to `target` (passed
    /// through unopened, or terminated and relayed) instead of HTTPS. The first target given for a
    /// host stays: `false` when the host had one already.
    pub fn add_passthrough(&mut self, host: &str, target: TlsTarget) -> bool {
        let host: Arc<str> = host.to_ascii_lowercase().into();
        if self.passthrough.contains_key(&host) {
            return false;
        }
        self.passthrough.insert(host, Arc::new(target));
        true
    }

    /// Ask TLS clients of `host` (exact or `*.` wildcard) for a certificate, checked by `auth`. The
    /// first given for a host stays: `false` when the host had one already.
    pub fn add_client_auth(&mut self, host: &str, auth: Arc<ClientAuth>) -> bool {
        let host: Arc<str> = host.to_ascii_lowercase().into();
        if self.client_auth.contains_key(&host) {
            return false;
        }
        self.client_auth.insert(host, auth);
        true
    }

    /// The client-certificate authentication a handshake for `host` gets, as the table will look it
    /// up by server name.
    pub fn client_auth_for(&self, host: &str) -> Option<&Arc<ClientAuth>> {
        by_server_name(&self.client_auth, true, host)
    }

    /// Relays TCP connections (UDP flows) to `port` as `route` says. The first route for a port
    /// stays: `Err` names the source of the one that holds it.
    pub fn add_port_route(&mut self, transport: Transport, port: u16, route: PortRoute) -> Result<(), Arc<str>> {
        if transport == Transport::Tcp {
            if let Some(held) = self.tls_ports.get(&port).and_then(TlsPort::any_source) {
                return Err(held);
            }
        }
        match self.ports.get(&(transport, port)) {
            Some(held) => Err(held.source.clone()),
            None => {
                self.ports.insert((transport, port), Arc::new(route));
                Ok(())
            }
        }
    }

    /// Passes (terminates) TLS connections to `port` for the server name `host` (exact, `*.` or `**.`
    /// wildcard, `""` for any name) as `target` says. The first target for a name stays, and a port
    /// of a TCP route is not a TLS one: `Err` names the source of the route that holds it.
    pub fn add_tls_port_name(&mut self, port: u16, host: &str, target: TlsTarget) -> Result<(), Arc<str>> {
        if let Some(held) = self.ports.get(&(Transport::Tcp, port)) {
            return Err(held.source.clone());
        }
        self.tls_ports.entry(port).or_default().add(host, target)
    }

    /// HTTPS answers of hosts with a certificate of their own carry `Strict-Transport-Security: value`.
    pub fn set_hsts(&mut self, value: Option<String>) {
        self.hsts = value.map(Into::into);
    }

    /// Plain-HTTP requests whose path starts with one of `prefixes` are never redirected to HTTPS
    /// (nor is an ACME challenge, whatever this says).
    pub fn set_no_tls_redirect(&mut self, prefixes: &[String]) {
        self.no_tls_redirect = prefixes.iter().map(|p| p.as_str().into()).collect();
    }

    /// Requests no rule matches (the default backend's, or a 404) leave no access-log record.
    pub fn set_unlogged_unmatched(&mut self, unlogged: bool) {
        self.unlogged_unmatched = unlogged;
    }

    /// Redirect plain-HTTP requests for `host` to HTTPS, with the request's trailing `/` as
    /// `slash` says. When several declarations of one host differ, the slash is kept.
    pub fn add_ssl_redirect(&mut self, host: &str, slash: TrailingSlash) {
        self.ssl_redirect.push((host.to_ascii_lowercase().into(), slash));
    }

    /// Builds the table. Host groups whose content equals the one in `previous` are taken from it
    /// (shared), so unchanged parts of the configuration cost nothing per generation.
    pub fn build(self, previous: Option<&RouteTable>) -> RouteTable {
        self.build_checked(previous).0
    }

    /// [`TableBuilder::build`], also saying which hosts' regex paths could not be compiled (those
    /// paths are left out; the rest of the host is served).
    pub fn build_checked(self, previous: Option<&RouteTable>) -> (RouteTable, Vec<RegexHostProblem>) {
        let mut table = RouteTable::default();
        let mut groups = Vec::with_capacity(self.hosts.len());
        let mut problems = Vec::new();
        for (host, mut draft) in self.hosts {
            let mut digest = draft.digest(&host);
            let shared = previous.and_then(|p| p.host_group(&host)).filter(|hr| hr.digest == digest).cloned();
            let group = match shared {
                Some(group) => group,
                None => {
                    let mut regex_paths = None;
                    if !draft.regex.is_empty() {
                        let mut ordered: Vec<(Arc<str>, Arc<Route>)> =
                            draft.regex.iter().map(|(p, r)| (p.clone(), r.clone())).collect();
                        ordered.sort_by(|a, b| regex_paths::location_order(&a.0, &b.0));
                        match regex_paths::RegexPaths::build(&ordered) {
                            Ok(paths) => regex_paths = Some(paths),
                            Err(message) => {
                                let mut sources: Vec<Arc<str>> =
                                    ordered.iter().map(|(_, r)| r.source.clone()).collect();
                                sources.sort();
                                sources.dedup();
                                problems.push(RegexHostProblem { host: host.clone(), sources, message });
                                draft.regex.clear();
                                digest = draft.digest(&host);
                            }
                        }
                    }
                    Arc::new(HostRoutes {
                        host: host.clone(),
                        exact: draft.exact.into_iter().collect(),
                        prefix: draft.prefix.into_iter().collect(),
                        regex: draft.regex.into_iter().collect(),
                        regex_paths,
                        digest,
                    })
                }
            };
            groups.push(digest);
            debug_assert_eq!(group_digest(&group.host, &group.items()), digest);
            if host.is_empty() {
                table.any_host = Some(group);
            } else if let Some(suffix) = host.strip_prefix("**.") {
                table.deep_wildcard_hosts.insert(suffix.into(), group);
            } else if let Some(suffix) = host.strip_prefix("*.") {
                table.wildcard_hosts.insert(suffix.into(), group);
            } else {
                table.exact_hosts.insert(host, group);
            }
        }
        let mut redirects = self.ssl_redirect;
        // `Keep` sorts last: the one a host keeps.
        redirects.sort();
        redirects.reverse();
        redirects.dedup_by(|later, kept| later.0 == kept.0);
        redirects.reverse();
        for (host, slash) in &redirects {
            match host.strip_prefix("*.") {
                Some(suffix) => table.ssl_redirect_wildcard.insert(suffix.into(), *slash),
                None => table.ssl_redirect.insert(host.clone(), *slash),
            };
        }
        table.ssl_redirect_hosts = redirects.into_boxed_slice();
        table.default_route = self.default_route;
        table.deep_tls = self.tls.keys().any(|h| h.starts_with("**."));
        table.tls = self.tls;
        table.passthrough = self.passthrough;
        table.client_auth = self.client_auth;
        table.hsts = self.hsts;
        table.no_tls_redirect = self.no_tls_redirect.into_boxed_slice();
        table.unlogged_unmatched = self.unlogged_unmatched;
        table.ports = self.ports;
        table.tls_ports = self.tls_ports.into_iter().map(|(port, names)| (port, Arc::new(names))).collect();
        let (digest, items_digest) = {
            let items = table.table_items();
            (table_digest(&groups, &items), table_digest(&[], &items))
        };
        table.digest = digest;
        table.items_digest = items_digest;
        (table, problems)
    }
}

impl RouteTable {
    /// The group of rules declared for `host` exactly as declared (`*.example.com`, `""` for any).
    pub fn host_group(&self, host: &str) -> Option<&Arc<HostRoutes>> {
        if host.is_empty() {
            self.any_host.as_ref()
        } else if let Some(suffix) = host.strip_prefix("**.") {
            self.deep_wildcard_hosts.get(suffix)
        } else if let Some(suffix) = host.strip_prefix("*.") {
            self.wildcard_hosts.get(suffix)
        } else {
            self.exact_hosts.get(host)
        }
    }
}

#[cfg(test)]
mod tests;
