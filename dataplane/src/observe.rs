//! Seeing requests: request ids, what a request did and the (route, backend) series it counts in
//! ([`requests`]), and the access log ([`access_log`]), written into the worker's own memory.

pub mod access_log;
pub mod requests;
