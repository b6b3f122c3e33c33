//! What a request gets, decided from the serving table, whatever protocol carried it: a redirect to
//! HTTPS, no route, a configured answer, or a backend. HTTP/1.1 exchanges and HTTP/2 streams both
//! ask here, so the two can never route differently.

use std::net::SocketAddr;

use ramjet_shared::{normalize_host, BackendKind, DirectResponse, Mirror, RequestView, RouteTable};

use crate::observe::Served;

/// The fate of one request.
pub(crate) enum Decision<'t, 'b> {
    /// `308` to `https://<host><target>` (the host normalized: lower case, no port).
    Redirect(&'b str),
    /// No rule matched and there is no default backend: 404.
    NoRoute,
    /// The route's configured answer.
    Direct { served: Served<'t>, response: &'t DirectResponse },
    /// Proxy to one of the backend's endpoints (none: 503).
    Proxy {
        /// The route, and the backend its policy picked (a canary's or the primary's): how to
        /// talk to it, and whose series counts the request.
        served: Served<'t>,
        slot: u32,
        endpoints: &'t [SocketAddr],
        /// Also send a copy of the request here (the share was drawn already).
        mirror: Option<&'t Mirror>,
        /// A sticky split drew a number for a new user: answer with it in the sticky cookie.
        sticky: Option<u32>,
    },
}

/// Routes `host` and `target` through `table`. A plain-text request (`tls` false) for a host with an
/// SSL redirect is redirected before routing; `host_buf` holds the normalized host for it. A route
/// with a policy reads the request through `req` and draws from `random` (the worker's generator);
/// a plain route touches neither.
#[inline]
pub(crate) fn decide<'t, 'b>(
    table: &'t RouteTable,
    host: &str,
    target: &str,
    tls: bool,
    host_buf: &'b mut [u8; 256],
    req: &impl RequestView,
    random: &mut impl FnMut() -> u32,
) -> Decision<'t, 'b> {
    if !tls && table.has_ssl_redirects() {
        if let Some(h) = normalize_host(host, host_buf).filter(|h| table.redirects_to_https(h)) {
            return Decision::Redirect(h);
        }
    }
    let Some(route) = table.route(host, target) else { return Decision::NoRoute };
    let pick = route.pick(req, random);
    let served = Served { route, backend: pick.backend };
    match &pick.backend.kind {
        BackendKind::Respond(response) => Decision::Direct { served, response },
        BackendKind::Endpoints(endpoints) => {
            let mirror = pick
                .rule
                .and_then(|r| r.mirror())
                .filter(|m| m.percent >= 100 || m.percent > 0 && random() % 100 < m.percent as u32);
            Decision::Proxy { served, slot: pick.backend.slot, endpoints, mirror, sticky: pick.new_sticky }
        }
    }
}

/// What a proxied request carries beyond its backend: a mirror to copy it to, a sticky draw to
/// answer with.
#[derive(Clone, Copy, Default)]
pub(crate) struct RouteExtras<'t> {
    pub mirror: Option<&'t Mirror>,
    pub sticky: Option<u32>,
}

/// A request view over an HTTP/1 head as received: `head` is the whole head (request line and
/// fields, up to the blank line), `target` the request target. Fields are found by walking the
/// lines — only for routes that have conditions.
pub(crate) struct Http1View<'a> {
    pub head: &'a [u8],
    pub target: &'a [u8],
}

impl Http1View<'_> {
    /// The field lines after the request line, as (name, trimmed value).
    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.head
            .split(|&b| b == b'\n')
            .skip(1)
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .take_while(|line| !line.is_empty())
            .filter_map(|line| {
                let colon = line.iter().position(|&b| b == b':')?;
                Some((&line[..colon], trim(&line[colon + 1..])))
            })
    }
}

impl RequestView for Http1View<'_> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.fields().find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v)
    }

    fn cookie(&self, name: &str) -> Option<&[u8]> {
        self.fields()
            .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
            .find_map(|(_, v)| ramjet_shared::cookie_value(v, name))
    }

    fn method(&self) -> &[u8] {
        let end = self.head.iter().position(|&b| b == b' ').unwrap_or(0);
        &self.head[..end]
    }

    fn query(&self) -> &[u8] {
        match self.target.iter().position(|&b| b == b'?') {
            Some(i) => &self.target[i + 1..],
            None => &[],
        }
    }
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |e| e + 1);
    &v[start..end]
}

/// The sticky cookie's `Set-Cookie` line for a new user's draw, ending in CRLF.
pub(crate) fn push_sticky_cookie(out: &mut Vec<u8>, draw: u32) {
    out.extend_from_slice(b"set-cookie: ");
    out.extend_from_slice(ramjet_shared::STICKY_COOKIE.as_bytes());
    out.push(b'=');
    crate::http1::head::push_decimal(out, draw as u64);
    out.extend_from_slice(b"; Path=/; HttpOnly; SameSite=Lax\r\n");
}
