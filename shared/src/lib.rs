//! The types the data plane and the control thread agree on, and nothing that does I/O.
//!
//! Data flows one way through them: the control thread's compiler builds a [`RouteTable`] and wraps it
//! in an immutable [`Generation`]; the applier hands that generation and a [`CertStore`] to
//! [`Published::publish`], which makes them visible with two pointer stores (certificates first, then
//! the table). Every data-plane worker loads the current generation once per request and routes with
//! [`RouteTable::route`]; the TLS resolver reads the certificate store. Workers count what they do in
//! their own [`WorkerCounters`] (relaxed, one cache line per worker), which the control thread sums
//! for `/metrics`.
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

mod cert;
mod generation;
mod publish;
mod route;
mod stats;

pub use cert::{CertId, CertStore, Certificate};
pub use generation::{Diagnostic, Digest, Generation};
pub use publish::Published;
pub use route::{
    normalize_host, Backend, BackendKind, DirectResponse, HostRoutes, PathKind, Route, RouteConflict, RouteKey,
    RouteTable, TableBuilder,
};
pub use stats::{StatusClass, UpstreamErrorKind, WorkerCounters, WorkerStats};
