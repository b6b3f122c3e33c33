//! What a request gets, decided from the serving table, whatever protocol carried it: a redirect to
//! HTTPS, no route, a configured answer, or a backend. HTTP/1.1 exchanges and HTTP/2 streams both
//! ask here, so the two can never route differently.

use std::net::{IpAddr, SocketAddr};

use ramjet_shared::{
    normalize_host, Affinity, BackendKind, Cors, DirectResponse, Edits, HashInput, HeaderEdits, Redirect, RequestView,
    RewriteScratch, Route, RouteLimits, RoutePolicy, RouteTable, Rule, TrailingSlash,
};

use std::cell::RefCell;

use super::answer::LocalAnswer;
use crate::error::ProxyError;
use crate::observe::requests::Served;

/// The fate of one request.
pub(crate) enum Decision<'t, 'b> {
    /// `308` to `https://<host><target>` (the host normalized: lower case, no port), the target's
    /// trailing `/` as the host asks.
    Redirect(&'b str, TrailingSlash),
    /// No rule matched and there is no default backend: 404.
    NoRoute,
    /// The route does not admit the client's address: 403.
    Forbidden(Served<'t>),
    /// `302` to `<scheme>://<Host as sent><path>` (ingress-nginx's `app-root`, for a request for `/`).
    AppRoot { served: Served<'t>, path: &'t str },
    /// `308` to `<scheme>://<host>:<port><target less one trailing slash>` (`from-to-www-redirect`).
    HostRedirect { served: Served<'t>, host: &'t str },
    /// The rule that decided answers with a redirect built from the request.
    RuleRedirect { served: Served<'t>, redirect: &'t Redirect },
    /// The route's configured answer.
    Direct { served: Served<'t>, response: &'t DirectResponse },
    /// Proxy to one of the backend's endpoints (none: 503).
    Proxy {
        /// The route, and the backend its policy picked (a canary's or the primary's): how to
        /// talk to it, and whose series counts the request.
        served: Served<'t>,
        endpoints: &'t [SocketAddr],
        /// The rule that decided, if the route has rules: its mirrors (each copy's share is drawn
        /// when the request is sent) and its deadline.
        rule: Option<&'t Rule>,
        /// A sticky split drew a number for a new user: answer with it in the sticky cookie.
        sticky: Option<u32>,
        /// The rule's header edits and rewrite.
        edits: Edits<'t>,
    },
}

/// Routes `host` and `target` through `table`. A plain-text request (`tls` false) for a host with an
/// SSL redirect is redirected before routing; `host_buf` holds the normalized host for it. A
/// route's own redirects come next, then its source ranges, checked against `peer`. A route
/// with a policy reads the request through `req` and draws from `random` (the worker's generator);
/// a plain route touches neither.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decide<'t, 'b>(
    table: &'t RouteTable,
    host: &str,
    target: &str,
    tls: bool,
    peer: IpAddr,
    host_buf: &'b mut [u8; 256],
    req: &impl RequestView,
    random: &mut impl FnMut() -> u32,
) -> Decision<'t, 'b> {
    if !tls && table.has_ssl_redirects() {
        if let Some(h) = normalize_host(host, host_buf) {
            if let Some(slash) = table.https_redirect(h, target) {
                return Decision::Redirect(h, slash);
            }
        }
    }
    let Some(route) = table.route(host, target) else { return Decision::NoRoute };
    if let Some(policy) = route.policy.as_deref() {
        // Answers of the route itself are counted on the route's own backend.
        let own = Served { route, backend: &route.backend };
        if let Some(to) = policy.host_redirect() {
            return Decision::HostRedirect { served: own, host: to };
        }
        if let Some(root) = policy.app_root() {
            if target.split('?').next() == Some("/") {
                return Decision::AppRoot { served: own, path: root };
            }
        }
        // nginx's access phase comes after the server's rewrites (the app root), before the rest.
        // With `satisfy any` and authentication, admission decides (`pipeline::admit`).
        let limits = &policy.limits;
        if !limits.sources.is_empty() && limits.sources_decide_alone() && !limits.sources.admits(peer) {
            return Decision::Forbidden(own);
        }
    }
    let pick = route.pick(req, random);
    let served = Served { route, backend: pick.backend };
    let edits = match pick.rule {
        Some(rule) if !pick.filters.is_empty() => {
            if let Some(redirect) = rule.redirect() {
                return Decision::RuleRedirect { served, redirect };
            }
            Edits::of(pick.filters)
        }
        _ => Edits::default(),
    };
    match &pick.backend.kind {
        BackendKind::Respond(response) => Decision::Direct { served, response },
        BackendKind::Endpoints(endpoints) => {
            Decision::Proxy { served, endpoints, rule: pick.rule, sticky: pick.new_sticky, edits }
        }
    }
}

/// How the request is addressed, for the answers routing may give: its host and target (in origin
/// form), whether it came over TLS, and the port it came to.
pub(crate) struct Addressed<'a> {
    pub host: &'a str,
    pub target: &'a str,
    pub tls: bool,
    pub port: u16,
    /// The host a trusted proxy's client asked for (the first `X-Forwarded-Host`): an HTTPS
    /// redirect names it, as ingress-nginx's `$best_http_host` with `use-forwarded-headers`.
    pub forwarded_host: Option<&'a str>,
}

/// A backend to proxy to, as routing decided it.
pub(crate) struct Proxy<'t> {
    pub served: Served<'t>,
    pub endpoints: &'t [SocketAddr],
    pub rule: Option<&'t Rule>,
    pub sticky: Option<u32>,
    pub edits: Edits<'t>,
}

/// What routing means for a request, whatever protocol carries it: an answer made here, a
/// failure, or a backend. `served` is the route (and backend) the request counts on, if any.
pub(crate) enum Step<'t, 'a> {
    Answer { answer: LocalAnswer<'a>, served: Option<Served<'t>> },
    Fail { error: ProxyError, served: Option<Served<'t>> },
    Proxy(Proxy<'t>),
}

impl<'t: 'a, 'a> Decision<'t, 'a> {
    /// The step this decision is for a request addressed as `to`; `scratch` is the worker's
    /// rewrite memory, which a rule's redirect uses.
    #[inline]
    pub fn step(self, to: &Addressed<'a>, scratch: &'a RefCell<RewriteScratch>) -> Step<'t, 'a> {
        let (answer, served) = match self {
            Decision::Proxy { served, endpoints, rule, sticky, edits } => {
                return Step::Proxy(Proxy { served, endpoints, rule, sticky, edits })
            }
            Decision::NoRoute => return Step::Fail { error: ProxyError::NoRoute, served: None },
            Decision::Forbidden(served) => return Step::Fail { error: ProxyError::Forbidden, served: Some(served) },
            Decision::Redirect(host, slash) => {
                let host = to.forwarded_host.unwrap_or(host);
                (LocalAnswer::HttpsRedirect { host, target: to.target, slash }, None)
            }
            Decision::AppRoot { served, path } => {
                (LocalAnswer::AppRoot { https: to.tls, host: to.host, path }, Some(served))
            }
            Decision::HostRedirect { served, host } => {
                let answer = LocalAnswer::HostRedirect { https: to.tls, host, port: to.port, target: to.target };
                (answer, Some(served))
            }
            Decision::RuleRedirect { served, redirect } => {
                let answer = LocalAnswer::Redirect { redirect, tls: to.tls, host: to.host, target: to.target, scratch };
                (answer, Some(served))
            }
            Decision::Direct { served, response } => {
                (LocalAnswer::Direct { response, https: to.tls, host: to.host }, Some(served))
            }
        };
        Step::Answer { answer, served }
    }
}

/// What a proxied request carries beyond its backend: mirrors to copy it to, a sticky draw to
/// answer with, the route's filters for the upstream head, header edits for the response.
#[derive(Clone, Copy, Default)]
pub(crate) struct RouteExtras<'t> {
    /// The rule that decided: its mirrors get a copy, its deadline bounds the exchange.
    pub rule: Option<&'t Rule>,
    pub sticky: Option<u32>,
    /// The route's policy when it has filters for every request (rewrite, request fields).
    pub filters: Option<&'t RoutePolicy>,
    /// The route's body limit and upstream timeouts, if it has its own.
    pub limits: Option<&'t RouteLimits>,
    /// The route's CORS and the allowed origin, when the request's origin is allowed.
    pub cors: Option<(&'t Cors, &'t [u8])>,
    /// The rule's header edits for the response.
    pub response: Option<&'t HeaderEdits>,
    /// Sticky sessions: the route's affinity, and the endpoint the request's cookie names (when it
    /// is one of the backend's).
    pub affinity: Option<(&'t Affinity, Option<usize>)>,
    /// The endpoint a new sticky session went to: the response sets the cookie for it.
    pub new_session: Option<SocketAddr>,
    /// The route hashes requests onto endpoints: this request's endpoint.
    pub hashed: Option<usize>,
    /// The route has error pages: the error backend's request head, less its `x-code` line.
    pub error_head: Option<&'t [u8]>,
    /// Fields the external auth service's answer sets on the upstream head.
    pub auth_fields: &'t [(Box<str>, Vec<u8>)],
    /// The external auth service's cookies, for the client's response.
    pub auth_cookies: &'t [Vec<u8>],
    /// What the backend is told of the client's certificate (`ssl-client-*`), on a host that
    /// asks for one.
    pub certificate_fields: &'t [(Box<str>, Vec<u8>)],
    /// `Strict-Transport-Security` for the answer: an HTTPS request to a host with a certificate
    /// of its own, when the table has HSTS.
    pub hsts: Option<&'t str>,
    /// The request came over HTTPS (a sticky cookie is then `Secure`).
    pub https: bool,
}

impl<'t> RouteExtras<'t> {
    pub fn new(route: &'t Route, rule: Option<&'t Rule>, sticky: Option<u32>) -> Self {
        let policy = route.policy.as_deref();
        let filters = policy.filter(|p| !p.filters.is_empty());
        let limits = policy.map(|p| &p.limits);
        RouteExtras { rule, sticky, filters, limits, ..RouteExtras::default() }
    }

    /// Whether admission has anything to check: CORS, per-client limits and auth all belong to a
    /// route's policy, so a plain route skips the phase without setting it up.
    #[inline]
    pub fn needs_admission(&self) -> bool {
        self.limits.is_some()
    }

    /// Reads what chooses the endpoint from the request, when the route has its own way: the
    /// sticky-session cookie (affinity), or the hash key (`upstream-hash-by`). `served` is the
    /// route and backend routing chose: a legacy canary's backend keeps no sessions.
    #[inline]
    pub fn choose_endpoint<'i>(
        &mut self,
        req: &impl RequestView,
        input: impl FnOnce() -> HashInput<'i>,
        (served, endpoints): (&Served<'_>, &[SocketAddr]),
        random: impl FnOnce() -> u32,
    ) {
        let Some(limits) = self.limits else { return };
        let canary = || !std::sync::Arc::ptr_eq(served.backend, &served.route.backend);
        if let Some(affinity) = limits.affinity.as_deref().filter(|_| !(limits.legacy_canary && canary())) {
            let named = req.cookie(&affinity.cookie).and_then(|v| Affinity::endpoint(v, endpoints));
            self.affinity = Some((affinity, named));
        }
        if let Some(by) = limits.hash_by.as_deref() {
            if !endpoints.is_empty() {
                self.hashed = Some(by.endpoint(by.key(req, &input()), endpoints, random));
            }
        }
    }

    /// The endpoint to try first: the one the sticky cookie names, else the request's hash, else
    /// the next in turn (ingress-nginx: affinity before `upstream-hash-by` before the balancer).
    #[inline]
    pub fn endpoint(&self, worker: &crate::worker::Worker, slot: u32, endpoints: &[SocketAddr]) -> usize {
        if self.limits.is_none() {
            return worker.next_endpoint(slot, endpoints.len());
        }
        match (self.affinity, self.hashed) {
            (Some((_, Some(named))), _) => named,
            (_, Some(hashed)) => hashed,
            _ if self.ewma() => worker.ewma.pick(endpoints, std::time::Instant::now(), &mut || worker.random()),
            _ => worker.next_endpoint(slot, endpoints.len()),
        }
    }

    /// Whether the route balances by response time (`load-balance: ewma`).
    #[inline]
    pub fn ewma(&self) -> bool {
        self.limits.is_some_and(|l| l.ewma)
    }

    /// Notes the response time of an endpoint of an EWMA route.
    #[inline]
    pub fn answered(&self, worker: &crate::worker::Worker, endpoint: SocketAddr, took: Option<std::time::Duration>) {
        if let (true, Some(took)) = (self.ewma(), took) {
            worker.ewma.observe(endpoint, took, std::time::Instant::now());
        }
    }

    /// Notes that the request went to `addr`: a sticky session that did not name it starts anew there.
    pub fn served_by(&mut self, addr: SocketAddr, endpoints: &[SocketAddr]) {
        if let Some((_, named)) = self.affinity {
            if named.map(|i| endpoints[i]) != Some(addr) {
                self.new_session = Some(addr);
            }
        }
    }

    /// The `Set-Cookie` line of a new sticky session, if there is one (ending in CRLF).
    pub fn push_session_cookie(&self, out: &mut Vec<u8>) {
        if let (Some((affinity, _)), Some(addr)) = (self.affinity, self.new_session) {
            // The clock is read only for an `Expires` date.
            let now = match affinity.expires {
                Some(_) => {
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
                }
                None => 0,
            };
            affinity.push_set_cookie(addr, self.https, now, out);
        }
    }

    /// The upstream timeouts for this request: the route's, else the daemon's.
    pub fn timeouts(&self, settings: &crate::settings::Settings) -> Timeouts {
        let default = settings.upstream_timeout;
        let deadline = self.rule.and_then(|r| r.deadline);
        let Some(limits) = self.limits else {
            return Timeouts { connect: default, send: default, read: default, deadline };
        };
        Timeouts {
            connect: limits.connect_timeout.unwrap_or(default),
            send: limits.send_timeout.unwrap_or(default),
            read: limits.read_timeout.unwrap_or(default),
            deadline,
        }
    }

    /// The rule that decided, when it copies requests to mirrors.
    #[inline]
    pub fn mirrors(&self) -> Option<&'t Rule> {
        self.rule.filter(|r| r.has_mirrors())
    }

    /// The route's per-client limits, if any.
    pub fn client_limits(&self) -> Option<&'t ramjet_shared::ClientLimits> {
        self.limits.and_then(|l| l.clients.as_deref())
    }

    /// The route's external authentication (`auth-url`), if it has one.
    #[inline]
    pub fn external_auth(&self) -> Option<&'t ramjet_shared::ExternalAuth> {
        self.limits.and_then(|l| l.external_auth.as_deref())
    }

    /// The external auth service's cookies for a response with `status`: on the statuses nginx's
    /// `add_header` adds fields to, or on every one with `auth-always-set-cookie`.
    #[inline]
    pub fn auth_cookies_for(&self, status: u16) -> &'t [Vec<u8>] {
        if self.auth_cookies.is_empty() {
            return &[];
        }
        let always = self.external_auth().is_some_and(|a| a.always_set_cookie);
        let added = matches!(status, 200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308);
        if always || added {
            self.auth_cookies
        } else {
            &[]
        }
    }

    /// Sets the external auth service's fields and the client certificate's on an upstream head.
    #[inline]
    pub fn set_auth_fields(&self, head: &mut Vec<u8>) {
        if self.auth_fields.is_empty() && self.certificate_fields.is_empty() {
            return;
        }
        for (name, value) in self.upstream_fields() {
            crate::policy::filters::set_field(head, name.as_bytes(), value);
        }
    }

    /// The fields admission sets on the upstream request: the external auth service's, then the
    /// client certificate's.
    pub fn upstream_fields(&self) -> impl Iterator<Item = (&'t str, &'t [u8])> {
        let auth = self.auth_fields.iter().map(|(name, value)| (&**name, &value[..]));
        auth.chain(self.certificate_fields.iter().map(|(name, value)| (&**name, &value[..])))
    }

    /// The host's client-certificate authentication, if it has one.
    #[inline]
    pub fn client_auth(&self) -> Option<&'t std::sync::Arc<ramjet_shared::ClientAuth>> {
        self.limits.and_then(|l| l.client_auth.as_ref())
    }

    /// The route's error pages (`custom-http-errors`), if it has them.
    #[inline]
    pub fn error_pages(&self) -> Option<&'t ramjet_shared::ErrorPages> {
        self.limits.and_then(|l| l.error_pages.as_deref())
    }

    /// The route's `proxy-next-upstream`, if it has one.
    #[inline]
    pub fn next_upstream(&self) -> Option<&'t ramjet_shared::NextUpstream> {
        self.limits.and_then(|l| l.next_upstream.as_ref())
    }

    /// The route's basic authentication, if any.
    #[inline]
    pub fn basic_auth(&self) -> Option<&'t ramjet_shared::BasicAuth> {
        self.limits.and_then(|l| l.auth.as_deref())
    }

    /// The route's CORS settings, if any.
    pub fn route_cors(&self) -> Option<&'t Cors> {
        self.limits.and_then(|l| l.cors.as_deref())
    }

    /// The route's largest request body.
    pub fn max_body(&self) -> Option<u64> {
        self.limits.and_then(|l| l.max_body)
    }

    /// Whether a declared body length is over the route's limit.
    pub fn too_large(&self, length: Option<u64>) -> bool {
        matches!((self.max_body(), length), (Some(max), Some(n)) if n > max)
    }
}

/// The upstream timeouts of one request: connecting, each write, each read.
#[derive(Clone, Copy)]
pub(crate) struct Timeouts {
    pub connect: std::time::Duration,
    pub send: std::time::Duration,
    pub read: std::time::Duration,
    /// The whole exchange, from the first byte sent upstream to the last byte of the answer
    /// ([`Rule::deadline`]).
    pub deadline: Option<std::time::Duration>,
}

/// The sticky cookie's `Set-Cookie` line for a new user's draw, ending in CRLF.
pub(crate) fn push_sticky_cookie(out: &mut Vec<u8>, draw: u32) {
    out.extend_from_slice(b"set-cookie: ");
    out.extend_from_slice(ramjet_shared::STICKY_COOKIE.as_bytes());
    out.push(b'=');
    crate::codec::http1::head::push_decimal(out, draw as u64);
    out.extend_from_slice(b"; Path=/; HttpOnly; SameSite=Lax\r\n");
}
