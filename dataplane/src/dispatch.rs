//! What a request gets, decided from the serving table, whatever protocol carried it: a redirect to
//! HTTPS, no route, a configured answer, or a backend. HTTP/1.1 exchanges and HTTP/2 streams both
//! ask here, so the two can never route differently.

use std::net::SocketAddr;

use std::sync::Arc;

use ramjet_shared::{normalize_host, BackendKind, DirectResponse, Route, RouteTable};

/// The fate of one request.
pub(crate) enum Decision<'t, 'b> {
    /// `308` to `https://<host><target>` (the host normalized: lower case, no port).
    Redirect(&'b str),
    /// No rule matched and there is no default backend: 404.
    NoRoute,
    /// The route's configured answer.
    Direct { route: &'t Arc<Route>, response: &'t DirectResponse },
    /// Proxy to one of the backend's endpoints (none: 503).
    Proxy { route: &'t Arc<Route>, slot: u32, endpoints: &'t [SocketAddr] },
}

/// Routes `host` and `target` through `table`. A plain-text request (`tls` false) for a host with an
/// SSL redirect is redirected before routing; `host_buf` holds the normalized host for it.
#[inline]
pub(crate) fn decide<'t, 'b>(
    table: &'t RouteTable,
    host: &str,
    target: &str,
    tls: bool,
    host_buf: &'b mut [u8; 256],
) -> Decision<'t, 'b> {
    if !tls && table.has_ssl_redirects() {
        if let Some(h) = normalize_host(host, host_buf).filter(|h| table.redirects_to_https(h)) {
            return Decision::Redirect(h);
        }
    }
    match table.route(host, target) {
        None => Decision::NoRoute,
        Some(route) => match &route.backend.kind {
            BackendKind::Respond(response) => Decision::Direct { route, response },
            BackendKind::Endpoints(endpoints) => Decision::Proxy { route, slot: route.backend.slot, endpoints },
        },
    }
}
