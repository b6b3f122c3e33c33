//! The types the data plane and the control thread agree on, and nothing that does I/O.
//!
//! Data flows one way through them: the control thread's compiler builds a [`RouteTable`] and wraps it
//! in an immutable [`Generation`]; the applier hands that generation and a [`CertStore`] to
//! [`Published::publish`], which makes them visible with two pointer stores (certificates first, then
//! the table). Every data-plane worker loads the current generation once per request and routes with
//! [`RouteTable::route`]; the TLS resolver reads the certificate store. Workers count what they do in
//! their own [`WorkerCounters`] (relaxed, one cache line per worker), which the control thread sums
//! for `/metrics`. [`admin`] is the admin API's wire schema, shared by the daemon and `ramjet-top`.
//!
//! # Words with one meaning each
//!
//! * **publish**: make a generation the one new requests use — two pointer stores in
//!   [`Published`], its certificates first, then its table ([`Published::publish`]). The control
//!   thread's applier is the only caller; it publishes when it applies a generation (unless a pin
//!   holds it back), on a rollback and on a release.
//! * **published**: of a generation, has been published. The history ring's and the admin API's
//!   `published` flag, and the audit record's (this record put it on the wire).
//! * [`Published`]: the handle holding what is published now — the two pointers every worker reads.
//! * **serving**: the generation published last, which workers load now.
//! * **apply** (control side): take a compiled generation, record it in the history ring, and
//!   publish it unless pinned.
//!
//! The `--publish-service` and `--publish-address` flags keep ingress-nginx's names but are about
//! something else: the addresses written into Ingress status (`ramjet_control::cluster::StatusAddresses`).
//!
//! ```
//! use std::sync::Arc;
//! use ramjet_shared::{Backend, BackendKind, Published, RouteTable, TableBuilder, PathKind};
//!
//! let hello = Arc::new(Backend::respond("hello", 0, 200, "hi\n"));
//! let mut builder = TableBuilder::new();
//! builder.add_route("example.com", "/api", PathKind::Prefix, hello, "doc").unwrap();
//! let table = builder.build(None);
//! assert!(table.route("EXAMPLE.com:8080", "/api/v1?x=1").is_some());
//! assert!(table.route("example.com", "/apiv1").is_none());
//! ```

pub mod admin;
mod cert;
pub mod date;
mod der;
mod digest;
mod generation;
pub mod log_line;
pub mod operation_name;
mod publish;
mod route;
mod stats;
mod upstream_tls;

pub use cert::{CertId, CertStore, Certificate};
pub use digest::{digest_of, Digest};
pub use generation::{Diagnostic, Generation, ObjectRef, Severity};
pub use publish::Published;
pub use route::affinity::{self, endpoint_key, Affinity, AFFINITY_COOKIE};
pub use route::basic_auth::BasicAuth;
pub use route::client_auth::{self, ClientAuth, ClientAuthSpec, Verdict, VerifyClient};
pub use route::client_limits::{ClientLimits, Rate};
pub use route::cors::{Cors, CORS_HEADERS, CORS_MAX_AGE, CORS_METHODS};
pub use route::error_pages::{self, ErrorPages};
pub use route::external_auth::{self, AuthService, ExternalAuth};
pub use route::hash_by::{self, HashBy, HashInput};
pub use route::htpasswd;
pub use route::next_upstream::{is_idempotent, NextUpstream};
pub use route::proxy_rewrite::{self, ProxyRewrites};
pub use route::request::{cookie_value, find_pair};
pub use route::source_ranges::{parse_ranges, IpBlock, SourceRanges};
pub use route::{
    check_regex_path, normalize_host, reason_phrase, route_object, Backend, BackendKind, BackendProtocol, Condition,
    DirectResponse, Edits, Filter, HeaderEdits, HostRoutes, Matcher, Mirror, PathKind, PathRewrite, Pick, PortRoute,
    Redirect, RegexHostProblem, RequestView, Rewrite, RewriteScratch, Route, RouteConflict, RouteKey, RouteLimits,
    RouteOrigin, RoutePolicy, RouteTable, Rule, Source, TableBuilder, TableItem, TlsPort, TlsTarget, TrailingSlash,
    Transport, WeightedBackend, ACME_CHALLENGE, STICKY_COOKIE, STICKY_RANGE,
};
pub use stats::{
    Exemplar, Histogram, HistogramSnapshot, RequestSample, RouteCounters, RouteSnapshot, StatusClass,
    UpstreamErrorKind, WorkerCounters, WorkerStats, DURATION_BUCKETS,
};
pub use upstream_tls::{CaBundle, SubjectAltName, UpstreamTls, UpstreamTlsSpec};
