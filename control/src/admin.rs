//! The admin listener: generations, rollback, metrics and probes, on the control thread.
//!
//! | verb and path | what | token |
//! |---|---|---|
//! | `GET /admin/generations` | the history ring, newest first, with serving and pin | never |
//! | `POST /admin/rollback {"generation": N}` | republish N and pin it | with `--admin-token-file` |
//! | `POST /admin/rollback {"digest": "<hex prefix>"}` | the same, by the compiled table's digest | with `--admin-token-file` |
//! | `DELETE /admin/rollback` | release the pin, publish the newest (idempotent) | with `--admin-token-file` |
//! | `GET /admin/traffic` | per route and backend counters, as JSON (for `ramjet-top`) | never |
//! | `GET /metrics` | Prometheus text | never |
//! | `GET /healthz`, `GET /readyz` | alive; ready once the first generation is published and the data plane listens, until shutdown begins | never |
//!
//! The JSON bodies are [`ramjet_shared::admin`]'s types, the one schema `ramjet-top` reads too.
//!
//! With `--metrics-addr`, a second listener serves only the probes and `/metrics` ([`health_router`]):
//! Prometheus and the kubelet reach that one, and the admin API can be bound where only operators
//! and the other replicas reach it.

mod error;

pub use error::AdminError;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ramjet_shared::admin::{
    GenerationInfo, Generations, PinAnswer, RollbackRequest, RollbackTarget, RouteAnswer, RouteServing, RouteTraffic,
    Traffic,
};
use ramjet_shared::{BackendKind, StatusClass, DURATION_BUCKETS};
use sha2::{Digest as _, Sha256};

use crate::apply::{Applier, RollbackError};
use crate::metrics::{render, MetricsSources};

/// Largest request body accepted by the admin API.
const MAX_BODY: usize = 4096;

pub struct AdminState {
    pub applier: Arc<Applier>,
    pub metrics: MetricsSources,
    /// SHA-256 of the bearer token, when one is required for the mutating verbs.
    pub token_digest: Option<[u8; 32]>,
    /// This process's id in `GET /admin/traffic` ([`ramjet_shared::admin::Traffic::instance`]).
    pub instance: String,
    /// Set once the data plane's listeners are bound: the daemon starts them after the first
    /// generation, and a probe that said ready before would send traffic to a closed port.
    pub listening: Arc<AtomicBool>,
    /// Set on SIGTERM: `/readyz` fails at once, so the endpoint is taken out of rotation while
    /// the data plane still accepts (`--shutdown-delay`).
    pub terminating: Arc<AtomicBool>,
}

pub fn router(state: Arc<AdminState>) -> Router {
    Router::new()
        .route("/admin/generations", get(generations))
        .route("/admin/rollback", axum::routing::post(rollback).delete(release))
        .route("/admin/traffic", get(traffic))
        .route("/admin/route", get(route))
        .merge(read_only())
        .fallback(|| async {
            AdminError::new(
                StatusCode::NOT_FOUND,
                "no such admin endpoint; see /admin/generations, /admin/rollback, /admin/traffic, /admin/route, /metrics, /healthz, /readyz",
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// The read-only listener: `/metrics`, `/healthz` and `/readyz`, nothing that changes or tells
/// more.
pub fn health_router(state: Arc<AdminState>) -> Router {
    read_only()
        .fallback(|| async {
            AdminError::new(
                StatusCode::NOT_FOUND,
                "this listener serves only /metrics, /healthz and /readyz; the admin API is on --admin-addr",
            )
        })
        .layer(DefaultBodyLimit::max(0))
        .with_state(state)
}

/// The routes both listeners serve: metrics and the probes.
fn read_only() -> Router<Arc<AdminState>> {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
}

/// Hashes a token so it can be compared in constant time whatever its length.
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn authorize(state: &AdminState, headers: &HeaderMap) -> Result<(), AdminError> {
    let Some(expected) = &state.token_digest else { return Ok(()) };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            AdminError::new(
                StatusCode::UNAUTHORIZED,
                "this endpoint needs `Authorization: Bearer <token>` (the daemon runs with --admin-token-file)",
            )
        })?;
    let got = token_digest(presented.trim());
    // Constant time: every byte is compared whatever the first difference.
    let diff = got.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if diff != 0 {
        return Err(AdminError::new(StatusCode::UNAUTHORIZED, "wrong admin token; nothing was changed"));
    }
    Ok(())
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

async fn generations(State(state): State<Arc<AdminState>>) -> Json<Generations> {
    let (pin, history_size, entries) = state.applier.snapshot();
    let generations = entries
        .into_iter()
        .map(|(e, serving)| {
            let g = &e.generation;
            GenerationInfo {
                generation: g.number,
                digest: g.digest.short(),
                compiled_at: rfc3339(g.compiled_at),
                applied_at: rfc3339(e.applied_at),
                published: e.published,
                serving,
                routes: g.table.route_count(),
                hosts: g.table.host_count(),
                certs: g.certificates.len(),
                summary: e.summary,
                changes: e.counts,
                diagnostics: g.diagnostics.to_vec(),
            }
        })
        .collect();
    Json(Generations { serving: pin.serving, pinned: pin.pinned, newest: pin.newest, history_size, generations })
}

/// A pin (and a release, below) runs on the control thread itself: it compares only the host groups
/// that changed between the two generations, about 20 µs whatever the table's size, less than the
/// hand-off to the blocking pool it used to take. Only a generation that has left the ring falls
/// back to the whole diff (milliseconds at 100,000 routes).
async fn rollback(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<PinAnswer>, AdminError> {
    authorize(&state, &headers)?;
    let body =
        body.map_err(|e| AdminError::new(e.status(), format!("cannot read the body (at most {MAX_BODY} bytes): {e}")))?;
    // Any content type: `curl -d` sends form-encoded headers with a JSON body.
    let request: RollbackRequest = serde_json::from_slice(&body).map_err(|e| {
        AdminError::new(
            StatusCode::BAD_REQUEST,
            format!("the body must be JSON like {{\"generation\": 41}} or {{\"digest\": \"3f2a9c01\"}}: {e}"),
        )
    })?;
    let target = request.target().map_err(|e| AdminError::new(StatusCode::BAD_REQUEST, e))?;
    let pinned = match target {
        RollbackTarget::Generation(n) => state.applier.rollback(n),
        RollbackTarget::Digest(prefix) => state.applier.rollback_to_digest(&prefix),
    };
    let pin = pinned.map_err(|e| match e {
        RollbackError::NotInHistory { .. } | RollbackError::DigestNotInHistory { .. } => {
            AdminError::new(StatusCode::NOT_FOUND, e.to_string())
        }
        RollbackError::AmbiguousDigest { .. } => AdminError::new(StatusCode::BAD_REQUEST, e.to_string()),
    })?;
    let message = format!(
        "generation {} is serving and pinned; new generations are recorded but not published until DELETE /admin/rollback",
        pin.serving
    );
    Ok(Json(PinAnswer { state: pin, message }))
}

async fn release(State(state): State<Arc<AdminState>>, headers: HeaderMap) -> Result<Json<PinAnswer>, AdminError> {
    authorize(&state, &headers)?;
    let (released, pin) = state.applier.release();
    let message = if released {
        format!("pin released; the newest generation {} is serving", pin.serving)
    } else {
        format!("nothing was pinned; generation {} is serving", pin.serving)
    };
    Ok(Json(PinAnswer { state: pin, message }))
}

/// `GET /admin/route`'s query.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteQuery {
    host: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    tls: bool,
}

/// Which route and backend the generation serving now gives a request, as the workers decide it
/// (`dataplane::pipeline::route`): the HTTPS redirect first, then the host and the path.
async fn route(
    State(state): State<Arc<AdminState>>,
    query: Result<axum::extract::Query<RouteQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(axum::extract::Query(q)) = query else {
        return AdminError::new(StatusCode::BAD_REQUEST, "expected ?host=NAME&path=/PATH (and tls=true for HTTPS)")
            .into_response();
    };
    let path = q.path.unwrap_or_else(|| "/".into());
    if !path.starts_with('/') {
        return AdminError::new(StatusCode::BAD_REQUEST, "path must start with /").into_response();
    }
    let mut buf = [0u8; 256];
    let host_chars = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':' | b'[' | b']');
    let Some(host) = ramjet_shared::normalize_host(&q.host, &mut buf).filter(|_| q.host.bytes().all(host_chars)) else {
        return AdminError::new(StatusCode::BAD_REQUEST, "host is not a host name").into_response();
    };
    let generation = state.metrics.published.generation().load_full();
    let table = &generation.table;
    let mut answer = RouteAnswer {
        generation: generation.number,
        host: host.to_string(),
        path: path.clone(),
        answer: "no_route".into(),
        route: None,
    };
    if !q.tls && table.redirects_request_to_https(host, &path) {
        answer.answer = "https_redirect".into();
    } else if let Some(route) = table.route(host, &path) {
        let backend = &route.backend;
        let (endpoints, responds) = match &backend.kind {
            BackendKind::Endpoints(e) => (e.iter().map(|a| a.to_string()).collect(), None),
            BackendKind::Respond(r) => (Vec::new(), Some(r.status)),
        };
        answer.answer = "route".into();
        answer.route = Some(RouteServing {
            source: route.source.to_string(),
            backend: backend.name.to_string(),
            endpoints,
            responds,
            rules: route.policy.as_ref().map_or(0, |p| p.rules.len()),
        });
    }
    Json(answer).into_response()
}

async fn traffic(State(state): State<Arc<AdminState>>) -> Json<Traffic> {
    let routes = state
        .metrics
        .workers
        .route_series()
        .into_iter()
        .map(|s| RouteTraffic {
            route: s.route.to_string(),
            backend: s.backend.to_string(),
            requests: s.requests.iter().sum(),
            client_errors: s.requests[StatusClass::ClientError as usize],
            server_errors: s.requests[StatusClass::ServerError as usize],
            duration_buckets: s.duration.buckets.to_vec(),
            duration_sum_us: s.duration.sum_us,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
            upstream_connect_errors: s.connect_errors,
        })
        .collect();
    Json(Traffic { instance: state.instance.clone(), bounds: DURATION_BUCKETS.to_vec(), routes })
}

/// Prometheus text, or OpenMetrics when the scraper asks for it (Prometheus does by default; it keeps
/// the exemplars with its exemplar storage on): only OpenMetrics carries exemplars.
async fn metrics(State(state): State<Arc<AdminState>>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if accept.contains("application/openmetrics-text") {
        let body = render(&state.metrics, true);
        ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body).into_response()
    } else {
        ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], render(&state.metrics, false))
            .into_response()
    }
}

async fn readyz(State(state): State<Arc<AdminState>>) -> Response {
    if state.terminating.load(Ordering::Acquire) {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
    } else if !state.applier.is_ready() {
        (StatusCode::SERVICE_UNAVAILABLE, "no configuration published yet\n").into_response()
    } else if !state.listening.load(Ordering::Acquire) {
        (StatusCode::SERVICE_UNAVAILABLE, "the data plane is not listening yet\n").into_response()
    } else {
        (StatusCode::OK, "ready\n").into_response()
    }
}
