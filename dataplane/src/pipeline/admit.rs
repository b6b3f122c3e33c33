//! Admission: what a request routed to a backend must pass before anything goes upstream, in
//! nginx's order — the host's client certificate first (nginx checks it as it reads the request),
//! then a CORS preflight is answered, then the route's per-client limits (preaccess), then basic
//! auth and external auth (access; all of them, or with `satisfy any` the first one passed). Every protocol admits through [`admit`]; a route that uses none
//! of these costs a request six `None` checks.

use ramjet_shared::RouteTable;

use super::answer::LocalAnswer;
use super::external_auth::{self, Asking, Passed, Refusal, Verdict};
use super::route::RouteExtras;
use super::view::RequestFields;
use crate::conn::{CertFields, ConnFacts};
use crate::error::ProxyError;
use crate::policy::client_certs::{self, CertRefusal};
use crate::policy::limits::UnderWay;
use crate::worker::Worker;

/// What an admitted request holds until its exchange ends: its place under the route's
/// per-client limits, the allowed CORS origin (copied into a pooled buffer: the request's own
/// bytes may move on), what the external auth service passed on, and what its backend is told of
/// the client's certificate.
#[derive(Default)]
pub(crate) struct Admission<'w> {
    under_way: Option<UnderWay<'w>>,
    certificate: Option<CertFields>,
    origin: Vec<u8>,
    passed: Option<Passed>,
    refusal: Option<Refusal>,
}

/// What admission decided.
pub(crate) enum Gate<'a> {
    /// Go on to the backend.
    Open,
    /// Answer here (a preflight, an auth challenge or refusal).
    Answer(LocalAnswer<'a>),
    /// Fail the request (answered as `rescue` says).
    Fail(ProxyError),
}

/// Admits the request described by `asking` and `view` to the route in `extras`. What it holds
/// for the rest of the exchange goes into `held`; [`Admission::grant`] then hands it to the
/// request's extras, and [`Admission::release`] gives its buffer back.
pub(crate) async fn admit<'t: 'h, 'h, 'w>(
    worker: &'w Worker,
    table: &RouteTable,
    (asking, facts): (&Asking<'_>, &ConnFacts),
    view: &impl RequestFields,
    extras: &RouteExtras<'t>,
    held: &'h mut Admission<'w>,
) -> Gate<'h> {
    if let Some(auth) = extras.client_auth() {
        match client_certs::admit(auth, facts, asking.host) {
            Ok(fields) => held.certificate = Some(fields),
            Err(refusal) => {
                let to_error_page = matches!(refusal, CertRefusal::NoCertificate | CertRefusal::BadCertificate);
                return Gate::Answer(match &auth.error_page {
                    Some(page) if to_error_page => LocalAnswer::Found { location: page.as_bytes() },
                    _ => LocalAnswer::CertificateRefused(refusal),
                });
            }
        }
    }
    let cors = extras.route_cors();
    if let Some(cors) = cors {
        if let Some(allow) = cors.allow_origin(view.header("origin")) {
            held.origin = worker.out_buffers.take();
            held.origin.clear();
            held.origin.extend_from_slice(allow);
            if asking.method == b"OPTIONS" {
                return Gate::Answer(LocalAnswer::CorsPreflight { cors, allow: &held.origin });
            }
        }
    }
    if let Some(limits) = extras.client_limits() {
        match worker.limiter.admit(limits, asking.peer) {
            Ok(under_way) => held.under_way = under_way,
            Err(_) => return Gate::Fail(ProxyError::OverLimit),
        }
    }
    let allowed = cors.filter(|_| !held.origin.is_empty()).map(|c| (c, &held.origin[..]));
    // nginx's `satisfy any`: the first access check a client passes lets it in; one that passes
    // none gets the last check's answer (a source range refused alone is routing's 403).
    let any = extras.limits.filter(|l| l.satisfy_any && !l.sources_decide_alone());
    if let Some(limits) = any {
        if !limits.sources.is_empty() && limits.sources.admits(asking.peer) {
            return Gate::Open;
        }
    }
    if let Some(auth) = extras.basic_auth() {
        let passed = worker.auth.admits(auth, view.header("authorization"));
        if passed && any.is_some() {
            return Gate::Open;
        }
        // With satisfy any and auth-url, the service has the last word.
        let external_decides = any.is_some() && extras.external_auth().is_some();
        if !passed && !external_decides {
            return Gate::Answer(LocalAnswer::Unauthorized { challenge: auth.challenge().as_bytes(), cors: allowed });
        }
    }
    if let Some(auth) = extras.external_auth() {
        // Boxed: the sub-request's state (an upstream exchange) is not carried by the future of
        // every request admitted, only by those that ask a service.
        let asked =
            Box::pin(external_auth::ask(worker, table, auth, asking, (view.each_field(), held.certificate.as_ref())));
        match asked.await {
            Verdict::Pass(passed) => held.passed = Some(passed),
            Verdict::Refuse(refusal) => {
                let refusal = held.refusal.insert(refusal);
                return Gate::Answer(match refusal {
                    Refusal::SignIn(location) => LocalAnswer::Found { location },
                    Refusal::Deny(401, Some(challenge)) => LocalAnswer::Unauthorized { challenge, cors: allowed },
                    Refusal::Deny(status, _) => LocalAnswer::Status(*status),
                });
            }
        }
    }
    Gate::Open
}

impl<'w> Admission<'w> {
    /// Hands what was admitted to the request's extras: the allowed origin's CORS fields, the
    /// auth service's fields and cookies.
    pub fn grant<'a>(&'a self, extras: &mut RouteExtras<'a>) {
        if !self.origin.is_empty() {
            extras.cors = extras.route_cors().map(|c| (c, &self.origin[..]));
        }
        if let Some(passed) = &self.passed {
            extras.auth_fields = &passed.fields;
            extras.auth_cookies = &passed.cookies;
        }
        if let Some(fields) = &self.certificate {
            extras.certificate_fields = fields;
        }
    }

    /// The exchange has ended: the origin's buffer goes back to the pool, the client's place
    /// under the limits is given up.
    pub fn release(self, worker: &Worker) {
        if self.origin.capacity() > 0 {
            worker.out_buffers.give(self.origin);
        }
    }
}
