//! What ramjet does with each annotation an Ingress carries: the one registry behind the
//! compiler's warnings and `ramjet migration-report`.
//!
//! Every `nginx.ingress.kubernetes.io/` annotation ingress-nginx knows is listed here with ramjet's
//! answer, and so is every `ramjet.dev/` annotation ramjet reads — in one table, each name once
//! with the prefixes it is read under. The values are checked by the same parsers the compiler
//! reads them with ([`values`]). [`review`] turns an Ingress's annotations into [`Finding`]s;
//! nothing is ever silently ignored:
//!
//! * **honoured** — same observable behaviour as ingress-nginx (or the value is ingress-nginx's
//!   default, so there is nothing to do);
//! * **approximated** — the effect users rely on is there, by other means (the finding says how);
//! * **refused** — the snippets: raw nginx configuration is never interpreted. The rest of the
//!   Ingress is served and a warning says what to use instead;
//! * **ignored** — an ingress-nginx feature ramjet does not have yet: the Ingress is served without
//!   it, with a warning naming the behaviour that is lost;
//! * **refused to serve** — an access-control annotation ramjet cannot enforce yet (authentication),
//!   or a value ramjet cannot reproduce (a redirect target with nginx variables, a
//!   backend protocol it does not speak): the Ingress is *not* served, because serving it otherwise
//!   would open it to everyone or change what it does without a word;
//! * **unknown** — a name under either prefix that neither project defines (a typo, usually).
//!
//! `docs/migrating-from-ingress-nginx.md` is the user's view of this table.

pub mod values;

use std::collections::BTreeMap;
use std::fmt;

use values::{
    auth_secret_type, auth_type, backend_protocol, body_size, boolean, connection_header, cookie_rewrite_check, count,
    hash_by, load_balance, next_upstream, on_off, redirect_rewrite, redirect_target, satisfy, seconds, server_alias,
    source_ranges, use_regex,
};

/// ingress-nginx's annotation prefix.
pub const NGINX_PREFIX: &str = "nginx.ingress.kubernetes.io/";
/// ingress-nginx's IngressClass `spec.controller`: ramjet taking over its class
/// (`--controller-name k8s.io/ingress-nginx`) says where ingress-nginx's defaults differ.
pub const NGINX_CONTROLLER: &str = "k8s.io/ingress-nginx";
/// Ramjet's own annotation prefix.
pub const RAMJET_PREFIX: &str = "ramjet.dev/";
/// Redirect plain HTTP to HTTPS for the Ingress's TLS hosts (`"true"`); ingress-nginx's name is
/// accepted too.
pub const SSL_REDIRECT_ANNOTATIONS: [&str; 2] = ["ramjet.dev/ssl-redirect", "nginx.ingress.kubernetes.io/ssl-redirect"];
/// The protocol of an Ingress's backends (`HTTP`, `HTTPS`, `H2C`, `GRPC`, `GRPCS`), ramjet's name
/// first.
pub const BACKEND_PROTOCOL_ANNOTATIONS: [&str; 2] =
    ["ramjet.dev/backend-protocol", "nginx.ingress.kubernetes.io/backend-protocol"];

/// Ramjet's answer to one annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Honoured,
    Approximated,
    Refused,
    Ignored,
    /// Not served at all: an access control that cannot be enforced.
    RefusedToServe,
    Unknown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Honoured => "honoured",
            Verdict::Approximated => "approximated",
            Verdict::Refused => "refused",
            Verdict::Ignored => "ignored",
            Verdict::RefusedToServe => "refused-to-serve",
            Verdict::Unknown => "unknown",
        }
    }

    /// Whether an Ingress carrying it behaves as the user wrote it.
    pub fn is_faithful(self) -> bool {
        matches!(self, Verdict::Honoured | Verdict::Approximated)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One annotation (or one default that differs), judged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// The annotation's full name.
    pub annotation: String,
    /// Its value; `None` for a finding about an annotation the Ingress does *not* carry.
    pub value: Option<String>,
    pub verdict: Verdict,
    /// What ramjet does, in one sentence.
    pub detail: String,
}

impl Finding {
    /// The diagnostic sentence for the compiler's warning or error (none for faithful verdicts).
    pub fn diagnostic(&self) -> Option<String> {
        let a = &self.annotation;
        let detail = &self.detail;
        if self.value.is_none() {
            // A default that differs: the detail is the whole sentence.
            return (!self.verdict.is_faithful()).then(|| format!("{detail}; the rest of the Ingress is served"));
        }
        Some(match self.verdict {
            Verdict::Honoured | Verdict::Approximated => return None,
            Verdict::Refused => format!("annotation {a} is refused: {detail}; the rest of the Ingress is served"),
            Verdict::Ignored => {
                format!("annotation {a} is not honoured by ramjet yet: {detail}; the rest of the Ingress is served")
            }
            Verdict::RefusedToServe => format!("annotation {a}: {detail}; the Ingress is not served"),
            Verdict::Unknown => format!("annotation {a} is {detail}; it has no effect"),
        })
    }
}

/// How ramjet supports one ingress-nginx annotation.
#[derive(Clone, Copy)]
enum Support {
    Honoured(&'static str),
    Approximated(&'static str),
    /// A snippet; the text says what to use instead.
    Snippet(&'static str),
    /// Not yet; the text names the behaviour that is lost.
    Ignored(&'static str),
    /// Honoured for the values `check` accepts; any other value keeps the Ingress out of the table
    /// (the compiler refuses it too, with the same reason).
    Checked {
        check: fn(&str) -> Result<(), String>,
        how: &'static str,
    },
}

/// One row of the registry: the name after the prefix, ramjet's support, and ingress-nginx's
/// default value under each prefix (a value equal to it asks for nothing, so it is honoured
/// whatever the support); `None` where the name is not read under that prefix at all.
struct Entry {
    name: &'static str,
    support: Support,
    nginx: Option<DefaultValue>,
    ramjet: Option<DefaultValue>,
}

/// The default value an annotation has under one prefix, if any.
type DefaultValue = Option<&'static str>;

/// Read under both prefixes, with the same default.
const fn e(name: &'static str, support: Support, default: DefaultValue) -> Entry {
    Entry { name, support, nginx: Some(default), ramjet: Some(default) }
}

/// Read under ingress-nginx's prefix only (ramjet has no name of its own for it).
const fn nginx(name: &'static str, support: Support, default: DefaultValue) -> Entry {
    Entry { name, support, nginx: Some(default), ramjet: None }
}

/// Read under ramjet's prefix only (ingress-nginx has no such annotation).
const fn ramjet(name: &'static str, support: Support, default: DefaultValue) -> Entry {
    Entry { name, support, nginx: None, ramjet: Some(default) }
}

/// Read under both prefixes; the default is ingress-nginx's alone, ramjet's name is judged by its value.
const fn nginx_default(name: &'static str, support: Support, default: DefaultValue) -> Entry {
    Entry { name, support, nginx: Some(default), ramjet: Some(None) }
}

use Support::{Approximated, Checked, Honoured, Ignored, Snippet};

const NO: Option<&str> = Some("false");
const BUFFERS: Support =
    Approximated("ramjet streams bodies through fixed per-connection buffers; nginx's buffer tuning has no equivalent");
const AUTH_TYPE: Support = Checked {
    check: auth_type,
    how: "basic: a request without a user and password of auth-secret is answered 401 with a Basic challenge for \
          auth-realm (docs/ingress.md)",
};
const AUTH_SECRET: Support = Honoured(
    "the users of basic authentication: the Secret's `auth` key as an htpasswd file (crypt, $apr1$, $1$, $5$, $6$, \
     bcrypt, {SHA}, {SSHA}, {PLAIN}), or with auth-secret-type auth-map one key per user; a Secret that is missing \
     or unusable makes the Ingress's paths answer 503, as ingress-nginx denies the location",
);
const AUTH_SECRET_TYPE: Support = Checked { check: auth_secret_type, how: "auth-file (the default) or auth-map" };
const AUTH_REALM: Support = Honoured("the realm of the 401's WWW-Authenticate challenge");
const AUTH_URL: Support = Checked {
    check: values::auth_url,
    how: "external authentication: a sub-request (the request's fields, no body) to this URL decides; 2xx lets the \
          request through, 401 and 403 are the client's answer (401 redirects to auth-signin when given), anything \
          else is 500. The URL names a Service of the cluster (http://service.namespace...), $host, or any other host \
          by address or DNS name (https:// verified against the Mozilla roots; docs/ingress.md)",
};
const AUTH_OPTION: Support = Honoured("as ingress-nginx, for auth-url's sub-request (docs/ingress.md)");
const AUTH_CACHE: Support = Ignored("the service's answers are not cached: every request asks it");
const AUTH_KEEPALIVE: Support =
    Approximated("connections to the auth service are pooled per worker like every upstream's");
const AUTH_COOKIE: Support = Checked {
    check: boolean,
    how: "with \"true\", the auth service's Set-Cookie goes on every response, errors included (by default only on \
          2xx and 3xx ones, as nginx's add_header)",
};
const AUTH_PART: Support = Ignored("not available: external authentication works without it");
const AFFINITY: Support = Honoured(
    "sticky sessions by cookie: a client that comes back with the cookie goes to the endpoint that served it while \
     that endpoint exists, else it is balanced and gets a new cookie (docs/ingress.md)",
);
const AFFINITY_MODE: Support = Approximated(
    "balanced and persistent both keep a session on its endpoint while the endpoint exists; balanced does not move \
     sessions to new endpoints when the backend scales up",
);
const AFFINITY_LOST: Support = Ignored("the sticky cookie is kept as it is whatever this asks");
const CORS: Support = Honoured(
    "with enable-cors: an allowed Origin gets the Access-Control-* fields on the response (replacing the backend's) \
     and an OPTIONS preflight is answered 204 by ramjet, with ingress-nginx's defaults and fallbacks (docs/ingress.md)",
);
/// Canary auto-promotion (ramjet's own; ingress-nginx has none): docs/canaries.md.
const AUTO_PROMOTE: Support =
    Honoured("canary auto-promotion: the weight steps up while the canary's success rate and p99 hold");
const CANARY: Support = Honoured("with ingress-nginx's semantics (docs/canaries.md)");
const MIRROR: Support = Honoured("a copy of each request, fire and forget (docs/mirrors.md)");
const HASH_BY: Support = Checked {
    check: hash_by,
    how: "consistent hashing: the key (nginx variables and text: $request_uri, $uri, $host, $remote_addr, \
          $http_*, $cookie_*, $arg_* ...) picks the endpoint, the same on every worker and replica; an endpoint \
          that leaves moves only its own keys (docs/ingress.md)",
};
const HASH_SUBSET: Support = Checked {
    check: boolean,
    how: "with upstream-hash-by, each key goes to a subset of upstream-hash-by-subset-size endpoints (the ones it \
          scores highest), one of them drawn at random per request, as ingress-nginx's chashsubset spreads a key",
};
const HASH_SUBSET_SIZE: Support = Honoured(
    "the size of each key's subset with upstream-hash-by-subset (3 by default, at most 32; a value that is not a \
     whole number above 0 gives 3, with a warning)",
);
const CUSTOM_ERRORS: Support = Honoured(
    "a backend answer with one of these statuses is replaced by default-backend's answer to the request (path /, \
     no body, with X-Code, X-Format, X-Original-URI, X-Namespace, X-Ingress-Name, X-Service-Name, X-Service-Port), \
     as nginx's proxy_intercept_errors; without default-backend they go to the controller configuration's \
     default-backend-service, and without either they pass through, with a warning (docs/ingress.md)",
);
const DEFAULT_BACKEND: Support = Honoured(
    "a Service of the Ingress's namespace (its first port) that serves the Ingress's paths while their Service \
     has no endpoints (with X-Code: 503) and answers for custom-http-errors",
);
const LOAD_BALANCE: Support = Checked {
    check: load_balance,
    how: "round_robin, or ewma: of two endpoints drawn at random, the one with the lower moving average of response \
          times (decaying over 10 s) takes the request; averages are kept per worker, as ingress-nginx keeps them \
          per nginx worker",
};
const SSL_PASSTHROUGH: Support = Checked {
    check: boolean,
    how: "TLS connections for the rules' hosts are passed by server name (SNI) to the first path's backend unopened; \
          ramjet never sees their requests, so the Ingress's other annotations do not apply to them, as in \
          ingress-nginx (always on: no --enable-ssl-passthrough needed; docs/ingress.md)",
};
const SATISFY: Support = Checked {
    check: satisfy,
    how: "nginx's satisfy: with `any`, a client that passes the source ranges, basic authentication or auth-url is \
          let in; one that passes none gets the last check's answer (auth-url's sign-in redirect, say)",
};
const TLS_AUTH_SECRET: Support = Honoured(
    "its ca.crt (and ca.crl) checks the certificates of the hosts' TLS clients, per host, for every path of every \
     Ingress of the host; a Secret that cannot be used answers the hosts 403, as in ingress-nginx \
     (docs/client-certificates.md)",
);
const TLS_VERIFY_CLIENT: Support = Honoured(
    "on: 400 without a certificate from the CAs; optional: 400 for a bad one; optional_no_ca: passed on whoever \
     issued it; off: none asked for (another value is taken as on, as in ingress-nginx)",
);
const TLS_VERIFY_DEPTH: Support =
    Honoured("the most intermediate certificates between the client's and a CA (another value is taken as 1)");
const TLS_ERROR_PAGE: Support = Checked {
    check: values::error_page,
    how: "a client refused for its certificate is redirected here (302) instead of answered 400",
};
const TLS_PASS_CERTIFICATE: Support =
    Checked { check: values::go_bool, how: "the backend gets the certificate, URL-encoded PEM, in ssl-client-cert" };
const TLS_MATCH_CN: Support = Checked {
    check: values::subject_pattern,
    how: "a client whose certificate's subject does not match is answered 403",
};
const TIMEOUT: Support = Checked {
    check: seconds,
    how: "the route's own timeout (whole seconds) for connecting to, writing to or reading from a backend, in \
          place of --upstream-timeout (60 s by default; ingress-nginx's defaults are 5 s to connect, 60 s to send \
          and read)",
};
const ALLOW_RANGE: Support = Checked {
    check: source_ranges,
    how: "requests from other client addresses (nginx's $remote_addr: the connection's peer, or who a PROXY \
          protocol header or a --trusted-proxies proxy names) are answered 403; a list with anything but addresses \
          and CIDR blocks keeps the Ingress out",
};
const DENY_RANGE: Support = Checked {
    check: source_ranges,
    how: "requests from these client addresses (the connection's peer, or who a PROXY protocol header or a \
          --trusted-proxies proxy names) are answered 403, before the allow-list is looked at; a list with anything \
          but addresses and CIDR blocks keeps the Ingress out",
};
const FORCE_SSL_REDIRECT: Support = Checked {
    check: boolean,
    how: "plain-HTTP requests for the Ingress's hosts answer 308 to https://<host><path>, whether the Ingress has \
          TLS or not (one trailing / of the target dropped unless preserve-trailing-slash, as in ingress-nginx)",
};
const UPSTREAM_VHOST: Support = Checked {
    check: values::upstream_vhost,
    how: "requests reach the backend with this Host (X-Forwarded-Host keeps the client's); a value with nginx \
          variables keeps the Ingress out",
};
const FROM_TO_WWW: Support = Checked {
    check: boolean,
    how: "for a host www.a.com, a.com answers 308 to <scheme>://www.a.com:<port><path> (and the other way round), \
          unless that name is a host already, as in ingress-nginx",
};
const SERVER_ALIAS: Support = Checked {
    check: server_alias,
    how: "each alias (comma-separated) is served with every route of the Ingress's hosts; an alias that is a host \
          of some Ingress's rules is ignored with a warning, as in ingress-nginx",
};
const BODY_SIZE: Support = Checked {
    check: body_size,
    how: "a request body larger than this (nginx sizes: 8m, 1k; 0 = unlimited) is answered 413; without the \
          annotation ramjet accepts any size (ingress-nginx's default is 1m)",
};
const NEXT_UPSTREAM: Support = Checked {
    check: next_upstream,
    how: "nginx's proxy_next_upstream: after the conditions listed (error, timeout, invalid_header, http_5xx, \
          http_403, http_404, http_429), before anything reached the client, the request goes to the next \
          endpoint; once sent, only if its body was buffered whole and its method is idempotent (or \
          non_idempotent is listed). Without it ramjet only moves a refused connection on, once (docs/ingress.md)",
};
const NEXT_UPSTREAM_TRIES: Support =
    Checked { check: count, how: "tries in all, the first included (3 by default; 0: every endpoint once)" };
const NEXT_UPSTREAM_TIMEOUT: Support =
    Checked { check: seconds, how: "no new try after this many seconds since the first began (0: no limit)" };
const RATE: Support = Checked {
    check: count,
    how: "per client address, as ingress-nginx's limit_req with nodelay: a burst of the rate times \
          limit-burst-multiplier (5) passes at once, then requests beyond the rate are answered 503; counted per \
          worker, where ingress-nginx counts per replica (docs/ingress.md)",
};
const CONNECTIONS: Support = Checked {
    check: count,
    how: "requests of one client address under way at once, beyond which it is answered 503, as ingress-nginx's \
          limit_conn; counted for the whole replica, across workers (docs/ingress.md)",
};
const BURST: Support = Checked { check: count, how: "each rate's burst is the rate times this (default 5)" };
const RATE_EXEMPT: Support = Checked {
    check: source_ranges,
    how: "client addresses (addresses and CIDR blocks) that no limit-rps, limit-rpm or limit-connections applies to",
};
const SSL_CIPHERS: Support =
    Approximated("rustls offers only modern cipher suites to backends, chosen for you (docs/ingress.md)");
const SSL_NAME: Support = Honoured(
    "the name the backends' certificates are verified against, sent as SNI with proxy-ssl-server-name: on \
     (docs/ingress.md)",
);
const SSL_PROTOCOLS: Support = Approximated("ramjet offers TLS 1.2 and 1.3 to backends, and the backend picks");
const SSL_SECRET: Support = Honoured(
    "its ca.crt verifies the backends' certificates when proxy-ssl-verify is on; a kubernetes.io/tls Secret's \
     certificate and key are presented to them, an Opaque Secret with ca.crt alone presents none (in the Ingress's \
     namespace; docs/ingress.md)",
);
const SSL_SERVER_NAME: Support = Checked { check: on_off, how: "SNI is sent to HTTPS and GRPCS backends when \"on\"" };
const SSL_VERIFY: Support = Checked {
    check: on_off,
    how: "with \"on\", the backends' certificates are verified against proxy-ssl-secret's ca.crt",
};
const SSL_VERIFY_DEPTH: Support =
    Approximated("a backend's chain is verified up to a CA of the bundle, whatever its length");
const SNIPPET_ALT: &str = "ramjet never interprets raw nginx configuration (snippets are how CVE-2025-1974, \
                           \"IngressNightmare\", reached the controller)";
const BACKEND_PROTOCOL: Support = Checked {
    check: backend_protocol,
    how: "HTTP, HTTPS, H2C, GRPC and GRPCS are spoken to the backends as asked (TLS as the proxy-ssl-* \
          annotations say)",
};
const PERMANENT_REDIRECT: Support = Checked {
    check: redirect_target,
    how: "every path of the Ingress answers 301 (or permanent-redirect-code) with this Location; a path is made \
          absolute on the request's scheme and host unless relative-redirects, as nginx's absolute_redirect does",
};
const PERMANENT_REDIRECT_CODE: Support =
    Honoured("the permanent redirect's status; a code outside 300–308 gives 301, as in ingress-nginx");
const TEMPORAL_REDIRECT: Support = Checked {
    check: redirect_target,
    how: "every path of the Ingress answers 302 (or temporal-redirect-code) with this Location; it wins over \
          permanent-redirect",
};
const TEMPORAL_REDIRECT_CODE: Support =
    Honoured("the temporal redirect's status; a code outside 300–307 gives 302, as in ingress-nginx");
const USE_REGEX: Support = Checked {
    check: use_regex,
    how: "paths are case-insensitive regular expressions matched from the start of the path; every path of the \
          host becomes one, tried longest first, as in ingress-nginx (docs/ingress.md)",
};
const REWRITE_TARGET: Support = Checked {
    check: values::rewrite_target,
    how: "the path sent to the backend is the target with $1…$9 from the path's captures (the query is kept); \
          every path of the host becomes a regular expression, as in ingress-nginx",
};
const APP_ROOT: Support = Checked {
    check: values::app_root,
    how: "a request for / on the Ingress's hosts answers 302 to <scheme>://<host>/<app-root>",
};
const X_FORWARDED_PREFIX: Support = Checked {
    check: values::forwarded_prefix,
    how: "rewritten requests carry X-Forwarded-Prefix with this value (only with rewrite-target, as in \
          ingress-nginx)",
};
const OTEL: Support =
    Ignored("tracing is the daemon's (--otlp-endpoint, its sampler and W3C trace context), for every route alike");

/// Every annotation ingress-nginx defines (its docs and `internal/ingress/annotations`) and every
/// one ramjet reads, sorted by the name after the prefix. `e`: the name is read under both
/// prefixes; `nginx`: under ingress-nginx's only; `ramjet`: under ramjet's only; `nginx_default`:
/// under both, the default being ingress-nginx's alone (ramjet's name is judged by its value).
const TABLE: &[Entry] = &[
    e("affinity", AFFINITY, None),
    nginx(
        "affinity-canary-behavior",
        Honoured(
            "on a canary Ingress, with the primary's session affinity: a user whose affinity cookie names a primary \
             endpoint stays on the primary, and (sticky, the default) one whose cookie names a canary endpoint stays \
             on the canary, before the header, cookie and weight rules, as ingress-nginx does; legacy: the canary \
             does not keep its users (its answers still carry the cookie, which ingress-nginx's do not)",
        ),
        Some("sticky"),
    ),
    e("affinity-mode", AFFINITY_MODE, Some("balanced")),
    e("allowlist-source-range", ALLOW_RANGE, None),
    e("app-root", APP_ROOT, None),
    e("auth-always-set-cookie", AUTH_COOKIE, NO),
    nginx("auth-cache-duration", AUTH_CACHE, None),
    nginx("auth-cache-key", AUTH_CACHE, None),
    nginx("auth-keepalive", AUTH_KEEPALIVE, None),
    nginx("auth-keepalive-requests", AUTH_KEEPALIVE, None),
    nginx("auth-keepalive-share-vars", AUTH_PART, NO),
    nginx("auth-keepalive-timeout", AUTH_KEEPALIVE, None),
    e("auth-method", AUTH_OPTION, None),
    nginx(
        "auth-proxy-set-headers",
        Honoured(
            "the fields of this ConfigMap (the Ingress's namespace) are set on auth-url's sub-request; a ConfigMap that \
             is missing, elsewhere or with a field that is not one makes the paths answer 503, as in ingress-nginx",
        ),
        None,
    ),
    e("auth-realm", AUTH_REALM, None),
    e("auth-request-redirect", AUTH_OPTION, None),
    e("auth-response-headers", AUTH_OPTION, None),
    e("auth-secret", AUTH_SECRET, None),
    e("auth-secret-type", AUTH_SECRET_TYPE, Some("auth-file")),
    e("auth-signin", AUTH_OPTION, None),
    e("auth-signin-redirect-param", AUTH_OPTION, None),
    nginx("auth-snippet", Snippet("auth-response-headers and auth-method cover the usual needs"), None),
    nginx("auth-tls-error-page", TLS_ERROR_PAGE, None),
    nginx("auth-tls-match-cn", TLS_MATCH_CN, None),
    nginx("auth-tls-pass-certificate-to-upstream", TLS_PASS_CERTIFICATE, NO),
    nginx("auth-tls-secret", TLS_AUTH_SECRET, None),
    nginx("auth-tls-verify-client", TLS_VERIFY_CLIENT, Some("on")),
    nginx("auth-tls-verify-depth", TLS_VERIFY_DEPTH, Some("1")),
    e("auth-type", AUTH_TYPE, None),
    e("auth-url", AUTH_URL, None),
    e("backend-protocol", BACKEND_PROTOCOL, Some("HTTP")),
    nginx_default("canary", CANARY, NO),
    ramjet("canary-auto-promote", AUTO_PROMOTE, None),
    e("canary-by-cookie", CANARY, None),
    e("canary-by-header", CANARY, None),
    e("canary-by-header-pattern", CANARY, None),
    e("canary-by-header-value", CANARY, None),
    ramjet("canary-failure-threshold", AUTO_PROMOTE, None),
    ramjet("canary-interval", AUTO_PROMOTE, None),
    ramjet("canary-max-p99", AUTO_PROMOTE, None),
    ramjet("canary-max-weight", AUTO_PROMOTE, None),
    ramjet("canary-min-requests", AUTO_PROMOTE, None),
    ramjet("canary-min-success-rate", AUTO_PROMOTE, None),
    ramjet("canary-state", Honoured("ramjet's own record of where auto-promotion stands, written by ramjet"), None),
    ramjet("canary-step-weight", AUTO_PROMOTE, None),
    ramjet("canary-sticky", CANARY, None),
    e("canary-weight", CANARY, None),
    e("canary-weight-total", CANARY, None),
    nginx("client-body-buffer-size", BUFFERS, None),
    nginx(
        "configuration-snippet",
        Snippet("for an HTTPS redirect use ssl-redirect; for the rest there is no equivalent yet"),
        None,
    ),
    nginx(
        "connection-proxy-header",
        Checked {
            check: connection_header,
            how: "HTTP/1.1 backends get `Connection: close` or `Connection: keep-alive` (nginx's proxy_set_header \
                  Connection); after close, ramjet does not reuse the connection. An upgrade (WebSocket) keeps its \
                  `Connection: upgrade`; HTTP/2 backends have no Connection field. Another value keeps the Ingress out",
        },
        None,
    ),
    e("cors-allow-credentials", CORS, None),
    e("cors-allow-headers", CORS, None),
    e("cors-allow-methods", CORS, None),
    e("cors-allow-origin", CORS, None),
    e("cors-expose-headers", CORS, None),
    e("cors-max-age", CORS, None),
    nginx(
        "custom-headers",
        Honoured(
            "the entries of this ConfigMap (of the Ingress's namespace) are set on every answer of the Ingress's \
             backends; each name must be in the controller configuration's global-allowed-response-headers \
             (--config), as in ingress-nginx. A ConfigMap that is missing, in another namespace, or with a name not \
             allowed or a value that is not plain text makes the Ingress's paths answer 503, with a warning",
        ),
        None,
    ),
    e("custom-http-errors", CUSTOM_ERRORS, None),
    e("default-backend", DEFAULT_BACKEND, None),
    e("denylist-source-range", DENY_RANGE, None),
    nginx(
        "disable-proxy-intercept-errors",
        Checked { check: boolean, how: "with \"true\", custom-http-errors does not replace the backend's answers" },
        NO,
    ),
    nginx(
        "enable-access-log",
        Checked { check: boolean, how: "with \"false\", the Ingress's requests leave no access-log record" },
        Some("true"),
    ),
    e("enable-cors", CORS, NO),
    nginx("enable-global-auth", Ignored("ramjet has no controller-wide auth-url to turn off"), Some("true")),
    nginx("enable-modsecurity", Ignored("there is no web application firewall"), NO),
    nginx("enable-opentelemetry", OTEL, NO),
    nginx("enable-owasp-core-rules", Ignored("there is no web application firewall"), NO),
    nginx(
        "enable-rewrite-log",
        Checked {
            check: boolean,
            how: "with \"true\", each rewrite is logged (info) as nginx's rewrite_log writes it: `\"(?i)<path>\" \
                  matches \"<uri>\", rewritten data: \"<new uri>\"`",
        },
        NO,
    ),
    nginx("fastcgi-index", Ignored("FastCGI backends are not available"), None),
    nginx("fastcgi-params-configmap", Ignored("FastCGI backends are not available"), None),
    e("force-ssl-redirect", FORCE_SSL_REDIRECT, NO),
    e("from-to-www-redirect", FROM_TO_WWW, NO),
    nginx("http2-push-preload", Approximated("HTTP/2 server push is gone from browsers; nothing is pushed"), NO),
    e("limit-allowlist", RATE_EXEMPT, None),
    e("limit-burst-multiplier", BURST, Some("5")),
    e("limit-connections", CONNECTIONS, None),
    nginx("limit-rate", Ignored("response bandwidth is not limited"), None),
    nginx("limit-rate-after", Ignored("response bandwidth is not limited"), None),
    e("limit-rpm", RATE, None),
    e("limit-rps", RATE, None),
    e("limit-whitelist", RATE_EXEMPT, None),
    e("load-balance", LOAD_BALANCE, Some("round_robin")),
    ramjet("mirror-backend", MIRROR, None),
    e("mirror-host", MIRROR, None),
    ramjet("mirror-percent", MIRROR, None),
    nginx_default("mirror-request-body", MIRROR, Some("on")),
    e("mirror-target", MIRROR, None),
    nginx("modsecurity-snippet", Snippet("there is no web application firewall"), None),
    nginx("modsecurity-transaction-id", Ignored("there is no web application firewall"), None),
    nginx("opentelemetry-operation-name", OTEL, None),
    nginx("opentelemetry-trust-incoming-span", OTEL, None),
    e("permanent-redirect", PERMANENT_REDIRECT, None),
    e("permanent-redirect-code", PERMANENT_REDIRECT_CODE, None),
    nginx(
        "preserve-trailing-slash",
        Checked {
            check: boolean,
            how: "the HTTPS redirects (ssl-redirect, force-ssl-redirect) keep a trailing / of the request target; \
                  without it one is dropped, as in ingress-nginx",
        },
        NO,
    ),
    e("proxy-body-size", BODY_SIZE, None),
    nginx("proxy-buffer-size", BUFFERS, None),
    nginx("proxy-buffering", BUFFERS, Some("off")),
    nginx("proxy-buffers-number", BUFFERS, None),
    nginx("proxy-busy-buffers-size", BUFFERS, None),
    e("proxy-connect-timeout", TIMEOUT, None),
    nginx(
        "proxy-cookie-domain",
        Checked {
            check: cookie_rewrite_check,
            how: "`<from> <to>`: a backend's Set-Cookie Domain equal to from (a leading dot ignored) becomes to, as \
                  nginx's proxy_cookie_domain; `off` for none",
        },
        Some("off"),
    ),
    nginx(
        "proxy-cookie-path",
        Checked {
            check: cookie_rewrite_check,
            how: "`<from> <to>`: a backend's Set-Cookie Path starting with from starts with to instead, as nginx's \
                  proxy_cookie_path; `off` for none",
        },
        Some("off"),
    ),
    nginx(
        "proxy-http-version",
        Approximated("ramjet speaks HTTP/1.1 to backends, HTTP/2 only to those whose backend-protocol asks for it"),
        Some("1.1"),
    ),
    nginx("proxy-max-temp-file-size", BUFFERS, None),
    e("proxy-next-upstream", NEXT_UPSTREAM, None),
    e("proxy-next-upstream-timeout", NEXT_UPSTREAM_TIMEOUT, None),
    e("proxy-next-upstream-tries", NEXT_UPSTREAM_TRIES, None),
    e("proxy-read-timeout", TIMEOUT, None),
    nginx(
        "proxy-redirect-from",
        Checked {
            check: redirect_rewrite,
            how: "with proxy-redirect-to: a backend's Location (and Refresh URL) starting with this text starts with \
                  proxy-redirect-to's instead, as nginx's proxy_redirect; `off` and `default` for none",
        },
        Some("off"),
    ),
    nginx(
        "proxy-redirect-to",
        Checked { check: redirect_rewrite, how: "what replaces proxy-redirect-from's text; `off` for none" },
        Some("off"),
    ),
    nginx(
        "proxy-request-buffering",
        Approximated("ramjet reads small bodies whole before sending and streams larger ones"),
        Some("on"),
    ),
    e("proxy-send-timeout", TIMEOUT, None),
    nginx("proxy-ssl-ciphers", SSL_CIPHERS, None),
    e("proxy-ssl-name", SSL_NAME, None),
    nginx("proxy-ssl-protocols", SSL_PROTOCOLS, None),
    e("proxy-ssl-secret", SSL_SECRET, None),
    nginx_default("proxy-ssl-server-name", SSL_SERVER_NAME, Some("off")),
    nginx_default("proxy-ssl-verify", SSL_VERIFY, Some("off")),
    nginx("proxy-ssl-verify-depth", SSL_VERIFY_DEPTH, None),
    nginx(
        "relative-redirects",
        Checked {
            check: boolean,
            how: "a permanent-redirect or temporal-redirect to a path answers that path as it is, not made absolute \
                  on the request's scheme and host",
        },
        NO,
    ),
    e("rewrite-target", REWRITE_TARGET, None),
    nginx("satisfy", SATISFY, Some("all")),
    e("server-alias", SERVER_ALIAS, None),
    nginx(
        "server-snippet",
        Snippet("for an HTTPS redirect use ssl-redirect; for the rest there is no equivalent yet"),
        None,
    ),
    nginx(
        "service-upstream",
        Checked {
            check: boolean,
            how: "with \"true\", requests go to the Service's cluster IP (one endpoint the cluster balances); \
                  \"false\" overrides the controller configuration's service-upstream",
        },
        NO,
    ),
    nginx("session-cookie-change-on-failure", AFFINITY_LOST, Some("false")),
    nginx("session-cookie-conditional-samesite-none", AFFINITY_LOST, Some("false")),
    e("session-cookie-domain", AFFINITY, None),
    e("session-cookie-expires", AFFINITY, None),
    e("session-cookie-max-age", AFFINITY, None),
    e("session-cookie-name", AFFINITY, None),
    e("session-cookie-path", AFFINITY, None),
    e("session-cookie-samesite", AFFINITY, None),
    e("session-cookie-secure", AFFINITY, None),
    nginx("ssl-ciphers", Approximated("rustls offers only modern cipher suites, chosen for you"), None),
    e("ssl-passthrough", SSL_PASSTHROUGH, NO),
    nginx("ssl-prefer-server-ciphers", Approximated("rustls offers only modern cipher suites, chosen for you"), None),
    e(
        "ssl-redirect",
        Honoured("plain HTTP for the Ingress's TLS hosts is redirected to HTTPS when \"true\" (308)"),
        None,
    ),
    nginx(
        "stream-snippet",
        Snippet(
            "TCP and UDP are proxied through Gateway API TCPRoutes and UDPRoutes or the routes file's tcp: and \
             udp: entries",
        ),
        None,
    ),
    e("temporal-redirect", TEMPORAL_REDIRECT, None),
    e("temporal-redirect-code", TEMPORAL_REDIRECT_CODE, None),
    e("upstream-hash-by", HASH_BY, None),
    nginx("upstream-hash-by-subset", HASH_SUBSET, NO),
    nginx("upstream-hash-by-subset-size", HASH_SUBSET_SIZE, Some("3")),
    e("upstream-vhost", UPSTREAM_VHOST, None),
    nginx("use-port-in-redirects", Ignored("ramjet's redirects name no port"), NO),
    e("use-regex", USE_REGEX, NO),
    e("whitelist-source-range", ALLOW_RANGE, None),
    e("x-forwarded-prefix", X_FORWARDED_PREFIX, None),
];

/// Judges every annotation under either prefix; others (kubectl's, Argo's, ...) are not ours to
/// judge. `has_tls`: the Ingress has a `spec.tls` entry, where ingress-nginx's defaults differ from
/// ramjet's; `nginx_defaults`: say so (the Ingress comes from ingress-nginx).
pub fn review(annotations: Option<&BTreeMap<String, String>>, has_tls: bool, nginx_defaults: bool) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (key, value) in annotations.into_iter().flatten() {
        let (nginx, name, project) = if let Some(name) = key.strip_prefix(NGINX_PREFIX) {
            (true, name, "ingress-nginx")
        } else if let Some(name) = key.strip_prefix(RAMJET_PREFIX) {
            (false, name, "ramjet")
        } else {
            continue;
        };
        let found = TABLE.binary_search_by(|entry| entry.name.cmp(name)).ok().map(|i| &TABLE[i]);
        let finding = match found.and_then(|entry| Some((entry, if nginx { entry.nginx } else { entry.ramjet }?))) {
            Some((entry, default)) => judge(entry, default, value),
            None => (Verdict::Unknown, format!("not an annotation {project} defines (a typo?)")),
        };
        findings.push(Finding {
            annotation: key.clone(),
            value: Some(value.clone()),
            verdict: finding.0,
            detail: finding.1,
        });
    }
    // ingress-nginx redirects plain HTTP to HTTPS for TLS hosts unless told not to; ramjet only
    // when told to. Said here so that the difference is never silent.
    let redirect_set = SSL_REDIRECT_ANNOTATIONS.iter().any(|a| annotations.is_some_and(|m| m.contains_key(*a)));
    if has_tls && !redirect_set && nginx_defaults {
        findings.push(Finding {
            annotation: format!("{NGINX_PREFIX}ssl-redirect"),
            value: None,
            verdict: Verdict::Ignored,
            detail: format!(
                "ingress-nginx redirects plain HTTP to HTTPS for TLS hosts unless {NGINX_PREFIX}ssl-redirect is \
                 \"false\"; ramjet only when it is \"true\", or with a controller configuration (--config, \
                 whose ssl-redirect is \"true\" unless it says otherwise): set one to keep the redirect"
            ),
        });
    }
    findings
}

fn judge(entry: &Entry, default: DefaultValue, value: &str) -> (Verdict, String) {
    if default.is_some_and(|d| d.eq_ignore_ascii_case(value.trim())) {
        return (Verdict::Honoured, "ingress-nginx's default value: nothing to do".into());
    }
    let detail = match entry.support {
        Checked { check, how } => match check(value) {
            Ok(()) => return (Verdict::Honoured, how.into()),
            Err(why) => return (Verdict::RefusedToServe, why),
        },
        Honoured(text) | Approximated(text) | Ignored(text) => text.to_string(),
        Snippet(instead) => {
            let lost = match directives(value) {
                d if d.is_empty() => String::new(),
                d => format!("; its directives ({d}) are not applied"),
            };
            format!("{SNIPPET_ALT}{lost}; {instead}")
        }
    };
    (entry.support.verdict(), detail)
}

impl Support {
    fn verdict(self) -> Verdict {
        match self {
            Honoured(_) | Checked { .. } => Verdict::Honoured,
            Approximated(_) => Verdict::Approximated,
            Snippet(_) => Verdict::Refused,
            Ignored(_) => Verdict::Ignored,
        }
    }
}

/// The directive names of an nginx snippet, in order, each once: `more_set_headers "a: b";
/// return 403;` gives `more_set_headers, return`. At most five, then `...`.
fn directives(snippet: &str) -> String {
    let mut names: Vec<&str> = Vec::new();
    let code = snippet.lines().map(|line| line.split_once('#').map_or(line, |(code, _)| code));
    for statement in code.flat_map(|line| line.split([';', '{', '}'])) {
        let Some(word) = statement.split_whitespace().next() else { continue };
        let is_name = word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if is_name && !names.contains(&word) {
            names.push(word);
        }
    }
    let more = names.len() > 5;
    names.truncate(5);
    let mut list = names.join(", ");
    if more {
        list.push_str(", ...");
    }
    list
}

/// Whether an Ingress carries any ingress-nginx annotation.
pub fn has_nginx_annotations(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.is_some_and(|m| m.keys().any(|k| k.starts_with(NGINX_PREFIX)))
}

#[cfg(test)]
mod tests;
