//! Response edits, the phase between a backend's answer and the client: the rule's response
//! header edits, the allowed origin's CORS fields, and the cookies ramjet adds (a new user's sticky
//! draw, a new sticky session, the external auth service's), and HSTS on HTTPS. Decided here once;
//! each protocol says how a field is set on its head through [`ResponseFields`]. A route that uses
//! none of these costs an answer six checks.

use ramjet_shared::proxy_rewrite::ProxyRewrites;
use ramjet_shared::HeaderEdits;

use super::route::{push_sticky_cookie, RouteExtras};

/// A response head being edited, in a protocol's own form.
pub(crate) trait ResponseFields {
    /// Applies a rule's response header edits.
    fn apply_edits(&mut self, edits: &HeaderEdits);
    /// Sets `name` to `value`, replacing what the backend sent.
    fn set(&mut self, name: &'static str, value: &[u8]);
    /// Adds the `set-cookie` lines `write` writes (each `set-cookie: <value>\r\n`).
    fn add_cookie_lines(&mut self, write: impl FnOnce(&mut Vec<u8>));
    /// Rewrites the backend's `Location`, `Refresh` and `Set-Cookie` fields as `rewrites` says.
    fn rewrite(&mut self, rewrites: &ProxyRewrites);
}

/// Edits the head of an answer with `status` to the request `extras` describes.
#[inline]
pub(crate) fn edit_response(extras: &RouteExtras<'_>, status: u16, head: &mut impl ResponseFields) {
    if let Some(edits) = extras.response {
        head.apply_edits(edits);
    }
    if let Some(edits) = extras.limits.and_then(|l| l.response_headers.as_deref()) {
        head.apply_edits(edits);
    }
    // Before ramjet adds its own cookies: only the backend's are rewritten, as nginx's.
    if let Some(rewrites) = extras.limits.and_then(|l| l.proxy_rewrites.as_deref()) {
        head.rewrite(rewrites);
    }
    if let Some(hsts) = extras.hsts {
        head.set("strict-transport-security", hsts.as_bytes());
    }
    if let Some((cors, allow)) = extras.cors {
        for (name, value) in cors.fields(allow) {
            head.set(name, value);
        }
    }
    let auth_cookies = extras.auth_cookies_for(status);
    if extras.sticky.is_some() || extras.new_session.is_some() || !auth_cookies.is_empty() {
        head.add_cookie_lines(|out| {
            if let Some(draw) = extras.sticky {
                push_sticky_cookie(out, draw);
            }
            extras.push_session_cookie(out);
            for cookie in auth_cookies {
                out.extend_from_slice(b"set-cookie: ");
                out.extend_from_slice(cookie);
                out.extend_from_slice(b"\r\n");
            }
        });
    }
}
