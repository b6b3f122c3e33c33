//! The worker side of route features: header edits and filters, error pages, per-client limits,
//! client certificates, basic-auth credentials and EWMA balancing. Each is pure logic over the
//! compiled route, or state a worker keeps for it; the pipeline calls them only for routes that use
//! them.

pub mod basic_auth;
pub mod client_certs;
pub mod edit;
pub mod error_pages;
pub mod ewma;
pub mod filters;
pub mod limits;
pub mod mirrors;
pub mod under_way;
